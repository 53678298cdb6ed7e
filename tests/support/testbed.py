"""What the Python end-to-end tests share: the testbed's tools (from its env file) and helpers
that run them. The testbed directory comes from GPUSTACK_TESTBED_DIR (scripts/testbed/testbed.sh)."""
import json
import os
import shutil
import subprocess
import time

DIR = os.environ["GPUSTACK_TESTBED_DIR"]


def env_file():
    values = {}
    with open(os.path.join(DIR, "env")) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            values[key] = value.strip("'\"")
    return values


ENV = env_file()
KUBECTL = os.path.join(ENV["KUBE_BIN"], "kubectl")
HELM = os.path.join(ENV["HELM_BIN"], "helm")
KUBECONFIG = os.path.join(DIR, "kubeconfig")


def run(*args, stdin=None, check=True, timeout=600):
    """Runs a command; with `check`, a failure raises with its output. `timeout` keeps a command
    that hangs from hanging the test."""
    done = subprocess.run(list(args), input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n"
                             f"{done.stderr}")
    return done


def kubectl(*args, **kw):
    return run(KUBECTL, "--kubeconfig", KUBECONFIG, *args, **kw)


def helm(*args, **kw):
    return run(HELM, "--kubeconfig", KUBECONFIG, *args, **kw)


def wait(what, predicate, seconds=120):
    """predicate()'s first true value within `seconds`; a predicate that raises is tried again."""
    deadline = time.time() + seconds
    last = None
    while time.time() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (AssertionError, KeyError, TypeError, IndexError, json.JSONDecodeError) as e:
            last = e
        time.sleep(1)
    raise AssertionError(f"timed out after {seconds}s waiting for {what} (last: {last})")


def api_get(path, timeout=30):
    """(HTTP status, parsed body) of a GET on the apiserver with the testbed's admin certificate:
    no kubectl in between (it retries a 429 by itself, and costs its start-up)."""
    import base64
    import ssl
    import tempfile
    import urllib.error
    import urllib.request
    global _API
    if _API is None:
        fields = {}
        with open(KUBECONFIG) as f:
            for line in f:
                key, _, value = line.strip().partition(": ")
                fields[key] = value
        work = tempfile.mkdtemp(prefix="testbed-api-")
        paths = {}
        for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
            paths[key] = os.path.join(work, key)
            with open(paths[key], "wb") as f:
                f.write(base64.b64decode(fields[key]))
        context = ssl.create_default_context(cafile=paths["certificate-authority-data"])
        context.load_cert_chain(paths["client-certificate-data"], paths["client-key-data"])
        _API = (fields["server"], context)
    server, context = _API
    try:
        with urllib.request.urlopen(server + path, context=context, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


_API = None


def install_local_chart(repo, build, images):
    """The chart installed on this testbed as scripts/local-cluster.sh installs it: `images`
    (names under BUILD/images, e.g. "gpustack-operator") imported into the real node, the values
    file `local-cluster.sh values` prints, `helm install --wait`."""
    archives = [os.path.join(build, "images", f"{name}.tar") for name in images]
    run(os.path.join(repo, "scripts/testbed/kubelet.sh"), "import", "--dir", DIR, *archives)
    values = run(os.path.join(repo, "scripts/local-cluster.sh"), "values", "--dir", DIR).stdout
    path = os.path.join(DIR, "local-values.yaml")
    with open(path, "w") as f:
        f.write(values)
    run(HELM, "--kubeconfig", KUBECONFIG, "install", "gpustack-operator",
        os.path.join(repo, "charts/gpustack-operator"), "-n", "gpustack-system",
        "--create-namespace", "-f", path, "--wait", "--timeout", "5m", timeout=400)


def publish_devices(node, fixture, repo):
    """A kwok node's Devices, as its node daemon would publish them (kwok runs none), from
    tests/fixtures/nodes/expected/<fixture>.devices.json."""
    with open(os.path.join(repo, "tests/fixtures/nodes/expected", fixture + ".devices.json")) as f:
        spec = json.load(f)
    run(KUBECTL, "--kubeconfig", KUBECONFIG, "apply", "--server-side", "--field-manager",
        "gpustack-tests", "-f", "-",
        stdin=json.dumps({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
                          "metadata": {"name": node}, "spec": spec}))


# How a cluster's Prometheus finds what to scrape without the Prometheus Operator: every Pod
# with prometheus.io/scrape, at its prometheus.io/port, path and scheme (the chart's
# annotations). Debian's Prometheus is built without Kubernetes service discovery, so the
# testbed reads the annotations itself and hands Prometheus the targets the usual kubernetes_sd
# relabelling would give (file_sd). honor_labels keeps the exporters' namespace and node labels.
PROMETHEUS_CONFIG = """global: {scrape_interval: 5s, evaluation_interval: 5s}
scrape_configs:
  - job_name: kubernetes-pods
    honor_labels: true
    tls_config: {insecure_skip_verify: true}
    file_sd_configs: [{files: [targets.json], refresh_interval: 5s}]
"""


def annotated_targets():
    """file_sd target groups for the Pods annotated prometheus.io/scrape=true."""
    pods = json.loads(kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    groups = []
    for pod in pods:
        a = pod["metadata"].get("annotations", {})
        ip = pod.get("status", {}).get("podIP")
        if a.get("prometheus.io/scrape") != "true" or not ip or "prometheus.io/port" not in a:
            continue
        groups.append({"targets": [f"{ip}:{a['prometheus.io/port']}"],
                       "labels": {"__scheme__": a.get("prometheus.io/scheme", "http"),
                                  "__metrics_path__": a.get("prometheus.io/path", "/metrics"),
                                  "kubernetes_namespace": pod["metadata"]["namespace"],
                                  "kubernetes_pod_name": pod["metadata"]["name"]}})
    return groups


class Prometheus:
    """A real Prometheus (Debian's package) scraping this testbed's annotated Pods, on a free
    loopback port; stopped on exit. `query` evaluates PromQL."""

    def __enter__(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = os.path.join(DIR, "prometheus")
        shutil.rmtree(self.dir, ignore_errors=True)  # no series from an earlier run
        os.makedirs(self.dir)
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(PROMETHEUS_CONFIG)
        self.discover()
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--enable-feature=extra-scrape-metrics"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not self.api("/-/ready", raw=True):
            if self.process.poll() is not None or time.time() > deadline:
                self.__exit__()
                with open(os.path.join(self.dir, "prometheus.log")) as f:
                    raise AssertionError(f"Prometheus did not start: {f.read()[-2000:]}")
            time.sleep(0.5)
        return self

    def discover(self):
        """The annotated Pods as they are now, for Prometheus's next refresh."""
        path = os.path.join(self.dir, "targets.json")
        with open(path + ".tmp", "w") as f:
            json.dump(annotated_targets(), f)
        os.replace(path + ".tmp", path)

    def __exit__(self, *exc):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()

    def api(self, path, raw=False, **params):
        import urllib.parse
        import urllib.request
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
        except OSError:
            return None
        return body if raw else json.loads(body)

    def query(self, expr):
        """The instant vector `expr` evaluates to now (a list of {metric, value})."""
        answer = self.api("/api/v1/query", query=expr)
        if not answer or answer.get("status") != "success":
            raise AssertionError(f"{expr}: {answer}")
        return answer["data"]["result"]
