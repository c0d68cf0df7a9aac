"""Google's own Cloud Run client against the FAKE Cloud Run Admin API v2 (gannet-cloudrun-fake).

The server is a fake; Google's client (google-cloud-run over its REST transport, google-auth for
the credentials, pinned by scripts/gcloud-client.sh) is the check. tests/google_client.rs runs
this script with that venv's python and asserts on what it prints: one JSON object on stdout.

    google_client.py schema
        The Cloud Run v2 messages and enums as this client's protos describe them (the fake's
        src/v2_schema.json is this output; the test compares the two).
    google_client.py drive ENDPOINT PROJECT LOCATION
        Services and revisions through the client with the key file of $KEY_FILE as the client
        uses it (self-signed JWTs): create, get, list, update (with and without update_mask),
        delete, validate_only, long-running operations waited on with operation.result(), a
        rollout watched through the service alone, revisions list and get, urls, and the values
        Google refuses.
    google_client.py touch ENDPOINT SERVICE
        Another client's write of a service gannet deployed: read it, record the client in its
        `client` field, write it all back (enums as Google's client sends them, numbers) with
        the key file of $KEY_FILE, wait for the operation; prints the service read again.
    google_client.py auth ENDPOINT PROJECT LOCATION MODE
        One list call with credentials as google-auth obtains them: MODE `token-grant` (the key
        file of $KEY_FILE refreshed at its token_uri, the OAuth2 JWT-bearer grant) or `metadata`
        (google.auth.default() on a machine whose metadata server is $GCE_METADATA_HOST).

Nothing here reaches Google: the endpoint, the token URI and the metadata server are the fake's,
and the test runs this with proxies pointing at a closed port.
"""

import json
import os
import re
import sys
import time

from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.cloud import run_v2
from google.protobuf import descriptor, field_mask_pb2


# --------------------------------------------------------------------------- schema


def schema():
    """Every message reachable from Service and Revision, and every enum they use."""
    messages, enums = {}, {}

    def output_only(full_name):
        # proto-plus keeps the proto comments as docstrings: "Output only. ..." marks a field.
        cls = run_v2
        for part in full_name.split(".")[4:]:
            cls = getattr(cls, part, None)
            if cls is None:
                return set()
        doc = cls.__doc__ or ""
        fields = re.finditer(r"^        (\w+) \([^)]*\):\n((?:            .*\n|\n)*)", doc, re.M)
        return {m.group(1) for m in fields if m.group(2).strip().startswith("Output only.")}

    def walk(message):
        if message.full_name in messages:
            return
        outputs = output_only(message.full_name)
        fields = []
        messages[message.full_name] = fields
        for field in message.fields:
            entry = {"name": field.json_name, "proto": field.name}
            if field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                nested = field.message_type
                if nested.GetOptions().map_entry:
                    entry["kind"] = "map"
                elif nested.full_name.startswith("google.protobuf."):
                    entry["kind"] = "scalar"
                else:
                    entry["kind"] = "message"
                    entry["type"] = nested.full_name
                    walk(nested)
            elif field.type == descriptor.FieldDescriptor.TYPE_ENUM:
                entry["kind"] = "enum"
                entry["type"] = field.enum_type.full_name
                enums[field.enum_type.full_name] = {v.name: v.number for v in field.enum_type.values}
            else:
                entry["kind"] = "scalar"
            if field.is_repeated and entry["kind"] != "map":
                entry["repeated"] = True
            elif field.has_presence and entry["kind"] in ("scalar", "enum"):
                # Set even at its default value (a oneof member, `optional`, a well-known
                # type): proto3 keeps it; any other scalar at its default is no value.
                entry["presence"] = True
            if field.name in outputs:
                entry["outputOnly"] = True
            fields.append(entry)

    walk(run_v2.Service.pb().DESCRIPTOR)
    walk(run_v2.Revision.pb().DESCRIPTOR)
    return {"messages": messages, "enums": enums}


# --------------------------------------------------------------------------- helpers


def clients(endpoint, credentials):
    options = ClientOptions(api_endpoint=endpoint)
    services = run_v2.ServicesClient(transport="rest", credentials=credentials, client_options=options)
    revisions = run_v2.RevisionsClient(transport="rest", credentials=credentials, client_options=options)
    return services, revisions


def as_json(message):
    """A message as Google's JSON: enums by name, fields at their default left out."""
    text = type(message).to_json(
        message, use_integers_for_enums=False, always_print_fields_with_no_presence=False
    )
    return json.loads(text)


def refusal(call):
    """What the client raised for a call Google refuses: status, message, field violations."""
    try:
        call()
    except exceptions.GoogleAPICallError as e:
        error = e.response.json().get("error", {}) if e.response is not None else {}
        violations = [
            {"field": v.get("field", ""), "description": v.get("description", "")}
            for d in error.get("details", [])
            if d.get("@type") == "type.googleapis.com/google.rpc.BadRequest"
            for v in d.get("fieldViolations", [])
        ]
        return {
            "exception": type(e).__name__,
            "code": e.code,
            "status": error.get("status", ""),
            "message": error.get("message", ""),
            "violations": violations,
        }
    return {"exception": None}


def with_image(read, image, keep_revision=False):
    """A service read, with another image (and, unless kept, no revision name)."""
    changed = type(read)(read)
    changed.template.containers[0].image = image
    if not keep_revision:
        changed.template.revision = ""
    return changed


def container(image, **fields):
    return run_v2.Container(image=image, **fields)


def service(image, **fields):
    template = fields.pop("template", {})
    containers = template.pop("containers", [container(image)])
    return run_v2.Service(template=run_v2.RevisionTemplate(containers=containers, **template), **fields)


# --------------------------------------------------------------------------- drive


def drive(endpoint, project, location):
    from google.oauth2 import service_account

    with open(os.environ["KEY_FILE"]) as f:
        info = json.load(f)
    credentials = service_account.Credentials.from_service_account_info(info)
    services, revisions = clients(endpoint, credentials)
    parent = f"projects/{project}/locations/{location}"
    web = f"{parent}/services/web"
    seen = {}

    # Create: every current field the issue names, enums sent as the client sends them
    # (numbers), output-only fields on input (ignored as Google ignores them).
    wanted = service(
        "gcr.io/demo/web:v1",
        labels={"team": "payments"},
        ingress=run_v2.IngressTraffic.INGRESS_TRAFFIC_INTERNAL_ONLY,
        iap_enabled=True,
        uri="https://ignored.example",
        reconciling=True,
        template={
            "execution_environment": run_v2.ExecutionEnvironment.EXECUTION_ENVIRONMENT_GEN2,
            "containers": [
                container(
                    "gcr.io/demo/web:v1",
                    env=[run_v2.EnvVar(name="MODE", value="prod")],
                    resources=run_v2.ResourceRequirements(limits={"cpu": "1", "memory": "512Mi"}),
                    readiness_probe=run_v2.Probe(
                        http_get=run_v2.HTTPGetAction(path="/ready"), period_seconds=5
                    ),
                )
            ],
        },
    )
    create = services.create_service(parent=parent, service=wanted, service_id="web")
    seen["create_metadata"] = as_json(create.metadata) if create.metadata else None
    seen["created"] = as_json(create.result(timeout=60))
    seen["get"] = as_json(services.get_service(name=web))

    # validate_only: checked and answered with the defaults, nothing stored.
    dry = services.create_service(
        request=run_v2.CreateServiceRequest(
            parent=parent, service=service("gcr.io/demo/dry:v1"), service_id="dry", validate_only=True
        )
    )
    seen["validate_only_create"] = as_json(dry.result(timeout=60))
    seen["validate_only_get"] = refusal(lambda: services.get_service(name=f"{parent}/services/dry"))

    # update_mask: only the labels change, though the body also carries another image.
    current = services.get_service(name=web)
    current.labels["team"] = "checkout"
    current.template.containers[0].image = "gcr.io/demo/web:not-in-the-mask"
    masked = services.update_service(
        request=run_v2.UpdateServiceRequest(
            service=current, update_mask=field_mask_pb2.FieldMask(paths=["labels"])
        )
    )
    seen["masked"] = as_json(masked.result(timeout=60))

    # An update without a mask: the whole service, a new template, a new revision. The
    # template read names its revision: a changed template must not reuse that name (Google
    # answers 409), so it is cleared, as gcloud clears it.
    current = services.get_service(name=web)
    seen["reused_revision_name"] = refusal(
        lambda: services.update_service(service=with_image(current, "gcr.io/demo/web:v2", keep_revision=True))
    )
    current = services.get_service(name=web)
    current = with_image(current, "gcr.io/demo/web:v2")
    seen["updated"] = as_json(services.update_service(service=current).result(timeout=60))

    # validate_only on an update changes nothing.
    current = with_image(services.get_service(name=web), "gcr.io/demo/web:dry-run")
    dry = services.update_service(request=run_v2.UpdateServiceRequest(service=current, validate_only=True))
    dry.result(timeout=60)
    seen["after_validate_only_update"] = as_json(services.get_service(name=web))

    # A rollout finishes with time, whether or not anyone polls its operation: the service
    # alone is watched until it settles.
    current = with_image(services.get_service(name=web), "gcr.io/demo/web:v3")
    services.update_service(service=current)
    gets, started = 0, time.monotonic()
    while True:
        gets += 1
        watched = services.get_service(name=web)
        if not watched.reconciling or time.monotonic() - started > 30:
            break
        time.sleep(0.2)
    seen["watched"] = {"gets": gets, "service": as_json(watched)}

    # Revisions: listed newest first, each one readable by name.
    listed = list(revisions.list_revisions(parent=web))
    seen["revisions"] = [as_json(r) for r in listed]
    seen["revision"] = as_json(revisions.get_revision(name=listed[-1].name))

    # A second service, then the list, one per page (the client follows nextPageToken).
    services.create_service(
        parent=parent, service=service("us-docker.pkg.dev/demo/api/api:v1"), service_id="api"
    ).result(timeout=60)
    pages = services.list_services(request=run_v2.ListServicesRequest(parent=parent, page_size=1))
    seen["list_pages"] = [[s.name for s in page.services] for page in pages.pages]

    # Delete: a stale etag is refused, then the delete runs to done and the service is gone.
    seen["delete_stale_etag"] = refusal(
        lambda: services.delete_service(
            request=run_v2.DeleteServiceRequest(name=f"{parent}/services/api", etag='"stale"')
        )
    )
    deleted = services.delete_service(name=f"{parent}/services/api").result(timeout=60)
    seen["deleted"] = as_json(deleted)
    seen["get_deleted"] = refusal(lambda: services.get_service(name=f"{parent}/services/api"))

    # Values Google refuses.
    def create(service_id, **fields):
        body = service(fields.pop("image", "gcr.io/demo/bad:v1"), **fields)
        return lambda: services.create_service(parent=parent, service=body, service_id=service_id)

    def one_container(**fields):
        return {"template": {"containers": [container(fields.pop("image", "gcr.io/demo/bad:v1"), **fields)]}}

    seen["refused"] = {
        "upper-case id": refusal(create("Web")),
        "50-character id": refusal(create("w" * 50)),
        "memory lots": refusal(
            create("bad", **one_container(resources=run_v2.ResourceRequirements(limits={"memory": "lots"})))
        ),
        "cpu 7": refusal(create("bad", **one_container(resources=run_v2.ResourceRequirements(limits={"cpu": "7"})))),
        "env name with =": refusal(create("bad", **one_container(env=[run_v2.EnvVar(name="A=B", value="x")]))),
        "env PORT": refusal(create("bad", **one_container(env=[run_v2.EnvVar(name="PORT", value="8080")]))),
        "image :::": refusal(create("bad", image=":::")),
        "label key Bad Key": refusal(create("bad", labels={"Bad Key": "x"})),
    }
    seen["refused_left_nothing"] = [s.name for s in services.list_services(parent=parent)]
    return seen


# --------------------------------------------------------------------------- touch


def touch(endpoint, name):
    from google.oauth2 import service_account

    with open(os.environ["KEY_FILE"]) as f:
        credentials = service_account.Credentials.from_service_account_info(json.load(f))
    services, _ = clients(endpoint, credentials)
    current = services.get_service(name=name)
    current.client = "google-cloud-run-python"
    services.update_service(service=current).result(timeout=60)
    return as_json(services.get_service(name=name))


# --------------------------------------------------------------------------- auth


def auth(endpoint, project, location, mode):
    import google.auth
    from google.auth.transport.requests import Request
    from google.oauth2 import credentials as oauth2_credentials
    from google.oauth2 import service_account

    if mode == "token-grant":
        # google-auth's own refresh of a key file: a JWT-bearer grant posted to token_uri, with
        # the audience google-auth always signs for.
        with open(os.environ["KEY_FILE"]) as f:
            info = json.load(f)
        scopes = ["https://www.googleapis.com/auth/cloud-platform"]
        key = service_account.Credentials.from_service_account_info(info, scopes=scopes)
        key.refresh(Request())
        credentials = oauth2_credentials.Credentials(token=key.token)
        found = {"token_expires": key.expiry is not None}
    elif mode == "metadata":
        credentials, default_project = google.auth.default()
        found = {"credentials": type(credentials).__module__, "project": default_project}
    else:
        raise SystemExit(f"unknown auth mode {mode!r}")
    services, _ = clients(endpoint, credentials)
    names = [s.name for s in services.list_services(parent=f"projects/{project}/locations/{location}")]
    if mode == "metadata":
        found["email"] = credentials.service_account_email
    return {**found, "services": names}


def main(argv):
    if argv[1:2] == ["schema"]:
        out = schema()
    elif argv[1:2] == ["drive"] and len(argv) == 5:
        out = drive(*argv[2:5])
    elif argv[1:2] == ["touch"] and len(argv) == 4:
        out = touch(*argv[2:4])
    elif argv[1:2] == ["auth"] and len(argv) == 6:
        out = auth(*argv[2:6])
    else:
        raise SystemExit(__doc__)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv)
