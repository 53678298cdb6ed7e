#!/usr/bin/env python3
"""Writes a single-layer OCI image archive (an OCI layout in a tar, as `ctr images import` and
`skopeo copy oci-archive:` read it) from files on this machine: no registry, no daemon.

  oci_image.py --ref docker.io/gpustack/gpustack-operator:v0.1.0 --out image.tar \
      --entrypoint /opt/gpustack/bin/gpustack-operator --user 65532:65532 --env PATH=/usr/bin \
      --file /host/path:/image/path[:mode] --dir /tmp:1777 --text /etc/passwd:'root:x:0:...'

Layer entries get uid/gid 0 and mtime 0 and come in a fixed order, so the same inputs give the
same digests (a rebuild that changed nothing imports as nothing new). Symlinks on this machine are
followed: the image holds the file under the name asked for.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def parse_spec(spec, default_mode):
    parts = spec.split(":")
    if len(parts) == 2:
        return parts[0], parts[1], default_mode
    if len(parts) == 3:
        return parts[0], parts[1], int(parts[2], 8)
    raise SystemExit(f"oci_image.py: bad spec {spec!r} (want SRC:DST[:MODE])")


def build_layer(args):
    entries = {}  # image path -> TarInfo, data
    def add_dir(path, mode=None):
        path = path.strip("/")
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub and sub not in entries:
                info = tarfile.TarInfo(sub)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                entries[sub] = (info, None)
        if mode is not None:
            entries[path][0].mode = mode
    for spec in args.dir:
        path, mode = (spec.split(":") + ["755"])[:2]
        add_dir(path, int(mode, 8))
    def add_file(dst, data, mode):
        dst = dst.strip("/")
        if "/" in dst:
            add_dir(dst.rsplit("/", 1)[0])
        info = tarfile.TarInfo(dst)
        info.size = len(data)
        info.mode = mode
        entries[dst] = (info, data)
    for spec in args.file:
        src, dst, mode = parse_spec(spec, None)
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SystemExit(f"oci_image.py: cannot read {src}: {e.strerror}")
        if mode is None:
            mode = os.stat(src).st_mode & 0o777
        add_file(dst, data, mode)
    for spec in args.text:
        dst, _, text = spec.partition("=")
        add_file(dst, text.encode(), 0o644)
    for spec in args.symlink:
        dst, target = spec.split(":", 1)
        dst = dst.strip("/")
        if "/" in dst:
            add_dir(dst.rsplit("/", 1)[0])
        info = tarfile.TarInfo(dst)
        info.type = tarfile.SYMTYPE
        info.linkname = target
        entries[dst] = (info, None)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path in sorted(entries):
            info, data = entries[path]
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", required=True, action="append", help="image name(s) to import as")
    p.add_argument("--out", required=True)
    p.add_argument("--entrypoint", nargs="*", default=[])
    # Arguments of the entrypoint that look like options ("-D"), one per flag.
    p.add_argument("--entrypoint-arg", action="append", default=[])
    p.add_argument("--user", default="")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--workdir", default="/")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--file", action="append", default=[], help="SRC:DST[:MODE]")
    p.add_argument("--dir", action="append", default=[], help="DST[:MODE]")
    p.add_argument("--text", action="append", default=[], help="DST=CONTENT")
    p.add_argument("--symlink", action="append", default=[], help="DST:TARGET")
    args = p.parse_args()

    layer = build_layer(args)
    blobs = {sha256(layer): layer}
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": (args.entrypoint + args.entrypoint_arg) or None,
                   "Env": args.env, "User": args.user, "WorkingDir": args.workdir,
                   "Labels": dict(l.split("=", 1) for l in args.label)},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha256(layer)]},
        "history": [{"created_by": "scripts/images/oci_image.py"}],
    }
    config = json.dumps(config, sort_keys=True).encode()
    blobs[sha256(config)] = config
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": "sha256:" + sha256(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": "sha256:" + sha256(layer), "size": len(layer)}],
    }, sort_keys=True).encode()
    blobs[sha256(manifest)] = manifest
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + sha256(manifest), "size": len(manifest),
         "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}}
        for ref in args.ref]}
    with tarfile.open(args.out, "w") as t:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", json.dumps(index).encode())
        for digest, data in sorted(blobs.items()):
            add("blobs/sha256/" + digest, data)
    print(f"{args.out}: {', '.join(args.ref)} (layer {len(layer) / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
