"""Deployment: the StreamletApplication custom resource's contract (crd: group, version, kind,
schema) and `blueprint build` (build: a verified blueprint and its deploy config rendered as the
resource the operator deploys). Over the spec (blueprint/); never imports the sandbox or Spark.
"""
