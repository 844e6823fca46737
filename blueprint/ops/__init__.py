"""Operations: the REST API, Prometheus metrics endpoint and read-only web view of running
applications, over a backend per setting (the sandbox's `blueprint/sandbox/ops.py`, the
operator's `streamlets_operator/api.py`).

    model.py        the API's JSON shapes (pydantic), the OpenAPI schemas' one home
    openapi.py      the OpenAPI 3.1 document (/openapi.json)
    backend.py      the backend protocol and its errors (HTTP statuses)
    figures.py      live figures from the streamlets' Prometheus samples (streamlets.runtime.metrics)
    deadletters.py  the newest dead letters' metadata, from the dead-letter topic
    view.py         server-rendered HTML: the graph as SVG, streamlets, topics, dead letters, savepoints
    server.py       the aiohttp application and a threaded server for the sandbox

Layer: over the spec, the SDK and the runtime; under the sandbox, the CLIs and the operator.
"""
