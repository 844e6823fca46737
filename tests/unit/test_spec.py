"""blueprint.deploy.spec: the typed application spec, and the CRD's schema checked against it."""

import copy

import pytest

from blueprint.deploy.crd import openapi_schema
from blueprint.deploy.spec import ApplicationSpec, StreamletSpec
from streamlets.settings import SETTINGS

COMPARED = ("type", "enum", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "default")


def _model_schema() -> dict:
    schema = ApplicationSpec.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def plain(node):
        if isinstance(node, list):
            return [plain(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return plain({**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}})
        options = node.get("anyOf")
        if options and {"type": "null"} in options and len(options) == 2:  # Optional[X]: X (unset is absent)
            (other,) = [o for o in options if o != {"type": "null"}]
            return plain({**{k: v for k, v in node.items() if k != "anyOf"}, **other})
        out = {k: plain(v) for k, v in node.items() if k != "title"}
        if out.get("default", 0) is None:
            out.pop("default")
        return out

    return plain(schema)


def _differences(model: dict, crd: dict, path: str = "spec") -> list[str]:
    found = [f"{path}: {key} is {crd.get(key)!r} in the CRD, {model.get(key)!r} in the model"
             for key in COMPARED if model.get(key) != crd.get(key)]
    if path.endswith(".descriptor"):  # the SDK's StreamletDescriptor, carried as it is
        return found
    if set(model.get("required", [])) != set(crd.get("required", [])):
        found.append(f"{path}: required {sorted(crd.get('required', []))} in the CRD, "
                     f"{sorted(model.get('required', []))} in the model")
    mine, theirs = model.get("properties", {}), crd.get("properties", {})
    found += [f"{path}.{k}: only in the CRD" for k in sorted(set(theirs) - set(mine))]
    found += [f"{path}.{k}: only in the model" for k in sorted(set(mine) - set(theirs))]
    for k in sorted(set(mine) & set(theirs)):
        found += _differences(mine[k], theirs[k], f"{path}.{k}")
    for key in ("items", "additionalProperties"):
        if isinstance(model.get(key), dict) or isinstance(crd.get(key), dict):
            found += _differences(model.get(key) or {}, crd.get(key) or {}, f"{path}.{key}")
    return found


def test_the_crds_spec_schema_is_the_models():
    """Every field of the CRD's spec is the model's, with the same type, enum, pattern, bounds,
    default and required fields (the descriptor's inside is the SDK's)."""
    assert _differences(_model_schema(), openapi_schema()["properties"]["spec"]) == []


def test_every_streamlet_setting_is_in_the_spec_and_the_crd():
    streamlet = openapi_schema()["properties"]["spec"]["properties"]["streamlets"]["items"]["properties"]
    for s in SETTINGS.values():
        assert s.spec_field in StreamletSpec.model_fields or s.field in StreamletSpec.model_fields
        crd = streamlet[s.spec_field]
        assert crd.get("enum") == (list(s.choices) if s.choices else None) and crd.get("pattern") == s.pattern


def test_the_check_finds_a_difference():
    crd = copy.deepcopy(openapi_schema()["properties"]["spec"])
    crd["properties"]["streamlets"]["items"]["properties"]["delivery"]["enum"] = ["exactly-once"]
    del crd["properties"]["upgradeMode"]
    found = _differences(_model_schema(), crd)
    assert any("delivery: enum" in f for f in found) and "spec.upgradeMode: only in the model" in found


def test_camel_case_in_snake_case_out():
    spec = ApplicationSpec.model_validate({
        "appId": "a", "image": "i", "kafka": {"bootstrapServers": "k:9092"},
        "streamlets": [{"name": "s", "className": "m.C", "descriptor": {}, "progressTracking": "async",
                        "scale": {"executors": 2}}]})
    s = spec.streamlets[0]
    assert (s.class_name, s.scale.executors, s.settings()) == ("m.C", 2, {"progress_tracking": "async"})
    assert spec.upgrade_mode == "last-state" and spec.image_pull_policy == "IfNotPresent"
    assert s.dump() == {"name": "s", "className": "m.C", "descriptor": {}, "progressTracking": "async",
                        "scale": {"executors": 2}}
    with pytest.raises(ValueError, match="delivery"):
        StreamletSpec.model_validate({"name": "s", "className": "m.C", "descriptor": {}, "delivery": "maybe"})
