"""A worker run as a process beside a testbed, serving its v1 API through the testbed's
aggregator (its APIServices through a Service and Endpoints of its own: --api-address), and an
HTTP connection over a unix socket (the worker-gateway's). Shared by gateway-e2e and the gateway
bench."""
import http.client
import json
import os
import signal
import socket
import subprocess


def host_address(run):
    """An address of this machine the apiserver can be sent to (Endpoints refuse loopback)."""
    for address in run("hostname", "-I").stdout.split():
        if "." in address and not address.startswith("127."):
            return address
    raise AssertionError("no non-loopback IPv4 address: the aggregator needs one to reach a worker")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Worker:
    def __init__(self, binary, build, kubeconfig, identity, log, run):
        self.binary, self.build, self.kubeconfig = binary, build, kubeconfig
        self.identity, self.log, self.run = identity, log, run
        self.port = free_port()
        self.process = None

    def start(self):
        env = {"KUBECONFIG": self.kubeconfig, "PATH": "/usr/bin:/bin"}
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [self.binary, "--log-level", "info", "worker", "--identity", self.identity,
                 "--secure-port", "0", "--webhook-port", str(self.port),
                 "--webhook-url", f"https://127.0.0.1:{self.port}",
                 "--api-address", host_address(self.run), "--no-kube-leader-election",
                 "--plugin-dir", os.path.join(self.build, "lib", "gpustack", "plugins")],
                env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, kubectl):
        """Stops it and removes its APIServices: an unavailable aggregated API stalls namespace
        deletion for later users of the control plane."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        kubectl("delete", "apiservice", "v1.worker.gpustack.ai", "v1.gpustack.ai",
                "--ignore-not-found", check=False)
        return self.process.returncode if self.process else None


def api_available(kubectl):
    status = json.loads(kubectl("get", "apiservice", "v1.worker.gpustack.ai", "-o", "json").stdout)["status"]
    return any(c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", []))


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def unix_get(path, target):
    """(status, parsed body) of a GET on a unix socket."""
    connection = UnixConnection(path)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else None
    finally:
        connection.close()
