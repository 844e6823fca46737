"""A CRD's structural schema (OpenAPI v3) as a JSON Schema, to check rendered resources against."""


def to_json_schema(node):
    """Structural OpenAPI v3 -> JSON Schema: x-kubernetes-* dropped, `nullable` as a null type,
    and objects with declared properties closed (the API server would prune anything else, so
    a field the CRD does not declare is a bug of the renderer)."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("nullable"):
        out.pop("nullable")
        if "type" in out:
            out["type"] = [out["type"], "null"]
    closed = not node.get("x-kubernetes-preserve-unknown-fields")
    if closed and out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out
