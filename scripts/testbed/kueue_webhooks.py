#!/usr/bin/env python3
"""Rewrites Kueue's webhook manifests for a Kueue process on 127.0.0.1.

Usage: kueue_webhooks.py MANIFESTS.yaml PORT CA.crt > webhooks.json

In a cluster the webhooks point at a Service; here each points at https://127.0.0.1:PORT<path>
with the testbed CA as caBundle. Only the webhooks of the integrations the testbed enables
(batch/job, pod) and of Kueue's own kinds are kept: a Fail-policy webhook for a framework
Kueue does not serve would refuse every Deployment or StatefulSet. Pod webhooks also get an
objectSelector on the queue-name label, so Pods outside Kueue never wait on it.
"""
import base64
import json
import sys

import yaml

KEPT_PATH_PARTS = ("-kueue-x-k8s-io-", "-batch-v1-job", "-v1-pod")
SYSTEM_NAMESPACES = {
    "matchExpressions": [{
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "kueue-system"],
    }]
}


def main():
    manifests, port, ca_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(ca_file, "rb") as f:
        ca_bundle = base64.b64encode(f.read()).decode()
    items = []
    with open(manifests) as f:
        for config in yaml.safe_load_all(f):
            if not config:
                continue
            kept = []
            for hook in config.get("webhooks", []):
                path = hook["clientConfig"]["service"]["path"]
                if not any(part in path for part in KEPT_PATH_PARTS):
                    continue
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
                if path.endswith("-v1-pod") or path.endswith("-batch-v1-job"):
                    hook["namespaceSelector"] = SYSTEM_NAMESPACES
                if path.endswith("-v1-pod"):
                    hook["objectSelector"] = {
                        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
                    }
                kept.append(hook)
            config["webhooks"] = kept
            config["metadata"]["name"] = "kueue-" + config["metadata"]["name"]
            items.append(config)
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
