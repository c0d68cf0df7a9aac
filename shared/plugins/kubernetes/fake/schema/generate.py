#!/usr/bin/env python3
"""Writes ../src/schema.json, the fake's compact copy of the built-in kinds' schemas, from a
real kube-apiserver's OpenAPI v3 (started by scripts/kube.sh; the Kubernetes version it pins).

    scripts/kube.sh start DIR && . DIR/env && python3 generate.py > ../src/schema.json

The compact form: {"kinds": {"apps/v1/Deployment": TYPE}, "types": {NAME: {FIELD: TYPE}}},
where a TYPE is "string", "integer", "number", "boolean", "any" (int-or-string, quantities,
raw JSON), {"map": TYPE}, {"list": TYPE} or "#NAME" (an object type in "types")."""
import json, os, ssl, sys, urllib.request

GROUP_VERSIONS = ["api/v1", "apis/apps/v1", "apis/autoscaling/v2", "apis/networking.k8s.io/v1",
                  "apis/batch/v1", "apis/policy/v1", "apis/rbac.authorization.k8s.io/v1"]
KINDS = {"api/v1": ["Namespace", "Service", "ConfigMap", "Secret", "ServiceAccount", "Pod"],
         "apis/apps/v1": ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"],
         "apis/autoscaling/v2": ["HorizontalPodAutoscaler"],
         "apis/networking.k8s.io/v1": ["Ingress"], "apis/batch/v1": ["Job", "CronJob"],
         "apis/policy/v1": ["PodDisruptionBudget"],
         "apis/rbac.authorization.k8s.io/v1": ["Role", "RoleBinding", "ClusterRole",
                                               "ClusterRoleBinding"]}

context = ssl.create_default_context(cafile=os.environ["GANNET_KUBE_CA"])
types = {}
kinds = {}


def fetch(gv):
    request = urllib.request.Request(f"{os.environ['GANNET_KUBE_URL']}/openapi/v3/{gv}",
                                     headers={"Authorization": "Bearer " + os.environ["GANNET_KUBE_TOKEN"]})
    return json.load(urllib.request.urlopen(request, context=context))["components"]["schemas"]


def compact(schema, schemas):
    if "allOf" in schema and len(schema["allOf"]) == 1:
        schema = {**schema, **schema["allOf"][0]}
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = schemas[name]
        if "properties" not in target or target.get("x-kubernetes-preserve-unknown-fields"):
            return compact({k: v for k, v in target.items()}, schemas) if "$ref" not in target else "any"
        if name not in types:
            types[name] = None
            types[name] = {f: compact(s, schemas) for f, s in target["properties"].items()}
        return "#" + name
    if "oneOf" in schema or "anyOf" in schema or schema.get("x-kubernetes-preserve-unknown-fields"):
        return "any"
    kind = schema.get("type")
    if kind == "array":
        return {"list": compact(schema.get("items", {}), schemas)}
    if kind == "object" and "properties" in schema:
        return {"object": {f: compact(s, schemas) for f, s in schema["properties"].items()}}
    if kind == "object":
        extra = schema.get("additionalProperties")
        return {"map": compact(extra, schemas)} if isinstance(extra, dict) else "any"
    if kind in ("string", "integer", "number", "boolean"):
        return kind
    return "any"


for gv in GROUP_VERSIONS:
    schemas = fetch(gv)
    api_version = gv.split("/", 1)[1]
    for kind in KINDS[gv]:
        name = next(n for n, s in schemas.items()
                    if any(g.get("kind") == kind and (g.get("group", "") + "/" + g["version"]).lstrip("/") == api_version
                           for g in s.get("x-kubernetes-group-version-kind", [])))
        kinds[f"{api_version}/{kind}"] = compact({"$ref": "#/components/schemas/" + name}, schemas)

json.dump({"kinds": kinds, "types": types}, sys.stdout, separators=(",", ":"), sort_keys=True)
sys.stdout.write("\n")
