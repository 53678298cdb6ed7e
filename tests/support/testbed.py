"""What the Python end-to-end tests share: the testbed's tools (from its env file) and helpers
that run them. The testbed directory comes from GPUSTACK_TESTBED_DIR (scripts/testbed/testbed.sh)."""
import json
import os
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
