#!/usr/bin/python3
"""Keeps deploy/ true: every YAML file parses, every flag given to linserve is
one the real binary has (and the real binary starts with them), the ports
(gRPC, HTTP, metrics) agree everywhere they are named, the affinity hash uses
the header the client sends, the HTTP API's paths stream unbuffered through
nginx and the Ingress, the compose nginx config is the template's rendering,
and every metric the Grafana dashboard queries is one a real server exports.

  manifests_test.py --linserve=BIN --client=BIN --source_dir=DIR [unittest args]

Run by ctest (tests/deploy/CMakeLists.txt) with /usr/bin/python3 and
Debian's python3-yaml.
"""
import argparse
import http.server
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import deploy_files as files  # noqa: E402
import live_processes as live  # noqa: E402

ARGS = None  # the parsed command line, set in main()


def source(*parts) -> pathlib.Path:
    return pathlib.Path(ARGS.source_dir, *parts)


class Deploy:
    """Everything read once from deploy/ and from the binaries' --help."""

    def __init__(self):
        self.documents = files.load_yaml_documents(source("deploy"))
        self.server_flags = files.help_flags(
            subprocess.run([ARGS.linserve, "--help"], capture_output=True, text=True).stdout)
        self.client_flags = files.help_flags(
            subprocess.run([ARGS.client, "--help"], capture_output=True, text=True).stdout)
        # Compose.
        self.compose = self.only("compose", "compose.yaml")
        self.compose_services = self.compose["services"]
        self.compose_linserve = {name: s for name, s in self.compose_services.items()
                                 if str(s.get("image", "")).split(":")[0] == "linserve"}
        self.prometheus = self.only("compose", "prometheus.yml")
        # Kubernetes: objects by (kind, name).
        self.k8s = {}
        for path, docs in self.documents.items():
            if path.parent == source("deploy", "kubernetes"):
                for doc in docs:
                    if doc.get("kind") != "Kustomization":
                        self.k8s[(doc.get("kind"), doc.get("metadata", {}).get("name"))] = doc
        self.deployment = self.k8s[("Deployment", "linserve")]
        self.pod = self.deployment["spec"]["template"]
        self.container = next(c for c in self.pod["spec"]["containers"] if c["name"] == "linserve")

    def only(self, *parts) -> dict:
        docs = self.documents[source("deploy", *parts)]
        assert len(docs) == 1, f"{parts}: {len(docs)} documents"
        return docs[0]

    def k8s_flagfile(self) -> tuple:
        """(path in the container, text) of the --flagfile the Deployment
        gives, read from the ConfigMap volume mounted there."""
        path = dict(files.parse_flags(self.container["args"]))["flagfile"]
        directory, key = path.rsplit("/", 1)
        mount = next(m for m in self.container["volumeMounts"] if m["mountPath"] == directory)
        volume = next(v for v in self.pod["spec"]["volumes"] if v["name"] == mount["name"])
        configmap = self.k8s[("ConfigMap", volume["configMap"]["name"])]
        return path, configmap["data"][key]

    def k8s_linserve_args(self) -> list:
        """The container's args with --flagfile replaced by its lines, in
        the order linserve reads them (later flags win)."""
        args = []
        for arg in self.container["args"]:
            if arg.startswith("--flagfile="):
                args += files.flagfile_lines(self.k8s_flagfile()[1])
            else:
                args.append(arg)
        return args

    def redis_k8s_container(self) -> dict:
        redis = self.k8s[("StatefulSet", "redis")]
        return next(c for c in redis["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "redis")


D = None  # the Deploy read in setUpModule


def setUpModule():
    global D
    D = Deploy()


def effective(args: list) -> dict:
    """{flag: value}, the last of each winning as in absl."""
    return dict(files.parse_flags(args))


def ports(flags: dict) -> tuple:
    """(gRPC, HTTP, metrics) ports of a linserve's effective flags."""
    return (files.port_of(flags["listen"]), files.port_of(flags["http_listen"]),
            int(flags["metrics_port"]))


HTTP_ROUTES = (("/v1/",), ("=", "/tokenize"), ("=", "/detokenize"), ("=", "/health"), ("=", "/"),
               ("=", "/playground.js"), ("=", "/playground.css"))


class NginxFronts:
    """A linserve nginx config read: its gRPC server block (the one that
    listens with http2), its HTTP server block, and the HOST:PORT servers
    of each upstream by name."""

    def __init__(self, text: str):
        conf = files.nginx_config(text)
        servers = conf.all("server")
        grpc = [s for s in servers if "http2" in s.all("listen")[0].args]
        http = [s for s in servers if s not in grpc]
        assert len(grpc) == 1 and len(http) == 1, "one gRPC and one HTTP server block"
        self.grpc, self.http = grpc[0], http[0]
        self.upstreams = {u.args[0]: [s.args[0] for s in u.all("server")]
                          for u in conf.all("upstream")}
        self.upstream_blocks = conf.all("upstream")
        self.conf = conf

    def listen(self, server: files.NginxDirective) -> str:
        return server.all("listen")[0].args[0]

    def grpc_upstream(self) -> str:
        """The upstream the gRPC server's every location passes to."""
        targets = {l.value("grpc_pass") for l in self.grpc.all("location")}
        assert len(targets) == 1, f"gRPC locations pass to {targets}"
        return targets.pop().removeprefix("grpc://")

    def http_location(self, route: tuple) -> files.NginxDirective:
        found = [l for l in self.http.all("location") if tuple(l.args) == route]
        assert found, f"no location {' '.join(route)} in the HTTP server block"
        return found[0]

    def http_setting(self, location: files.NginxDirective, name: str):
        """A proxy setting as nginx applies it there: the location's own,
        else the server block's."""
        return location.value(name, self.http.value(name))


class ParseTest(unittest.TestCase):
    def test_every_yaml_file_parses_into_documents(self):
        self.assertGreaterEqual(len(D.documents), 10)
        for path, docs in D.documents.items():
            self.assertTrue(docs, f"{path} has no document")
            for doc in docs:
                self.assertIsInstance(doc, dict, f"{path}: a document is not a mapping")

    def test_kubernetes_objects_have_api_version_kind_and_name(self):
        for path, docs in D.documents.items():
            if path.parent != source("deploy", "kubernetes"):
                continue
            for doc in docs:
                for field in ("apiVersion", "kind"):
                    self.assertIsInstance(doc.get(field), str, f"{path}: {field}")
                if doc["kind"] != "Kustomization":
                    self.assertTrue(doc.get("metadata", {}).get("name"), f"{path}: metadata.name")

    def test_kustomization_lists_every_manifest_but_the_servicemonitor(self):
        directory = source("deploy", "kubernetes")
        kustomization = D.documents[directory / "kustomization.yaml"][0]
        listed = set(kustomization["resources"])
        for name in listed:
            self.assertTrue((directory / name).is_file(), f"kustomization lists missing {name}")
        present = {p.name for p in directory.glob("*.yaml")}
        self.assertEqual(listed, present - {"kustomization.yaml", "servicemonitor.yaml"})

    def test_grafana_dashboard_and_provisioning_parse_and_agree(self):
        dashboard = json.loads(
            source("deploy/compose/grafana/dashboards/linserve.json").read_text())
        datasource = D.only("compose", "grafana", "provisioning", "datasources", "prometheus.yml")
        uid = datasource["datasources"][0]["uid"]
        self.assertEqual(datasource["datasources"][0]["url"],
                         f"http://prometheus:{self._prometheus_port()}")
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                self.assertEqual(target["datasource"]["uid"], uid, panel["title"])
        provider = D.only("compose", "grafana", "provisioning", "dashboards", "linserve.yml")
        dashboards_path = provider["providers"][0]["options"]["path"]
        self.assertIn(f"./grafana/dashboards:{dashboards_path}:ro",
                      D.compose_services["grafana"]["volumes"])

    def _prometheus_port(self) -> int:
        ports = D.compose_services["prometheus"]["ports"]
        return int(str(ports[0]).split(":")[-1])


class FlagsTest(unittest.TestCase):
    def assertKnown(self, args, known, where):
        for name, _ in files.parse_flags(args):
            self.assertIn(name, known, f"{where}: --{name} is not a flag of the binary")

    def test_help_lists_the_flags_deployments_use(self):
        # Guards the parser itself: an empty set would make the checks vacuous.
        for flag in ("listen", "http_listen", "metrics_port", "store", "shutdown_grace_seconds"):
            self.assertIn(flag, D.server_flags)
        self.assertIn("server", D.client_flags)

    def test_compose_gives_linserve_only_its_flags(self):
        self.assertEqual(len(D.compose_linserve), 2, "two linserve replicas")
        for name, service in D.compose_linserve.items():
            self.assertKnown(service["command"], D.server_flags, f"compose {name}")

    def test_kubernetes_gives_linserve_only_its_flags(self):
        # --flagfile is absl's own; its contents are checked line by line.
        args = [a for a in D.container["args"] if not a.startswith("--flagfile=")]
        self.assertKnown(args, D.server_flags, "deployment args")
        self.assertKnown(files.flagfile_lines(D.k8s_flagfile()[1]), D.server_flags, "ConfigMap")

    def test_compose_healthcheck_is_the_clients_health_command(self):
        for name, service in D.compose_linserve.items():
            test = service["healthcheck"]["test"]
            self.assertEqual(test[0], "CMD")
            self.assertEqual(pathlib.Path(test[1]).name, "linserve-client")
            self.assertEqual(test[2], "health")
            self.assertKnown(test[3:], D.client_flags, f"compose {name} healthcheck")

    def test_stop_grace_outlasts_the_drain(self):
        for name, service in D.compose_linserve.items():
            grace = int(effective(service["command"])["shutdown_grace_seconds"])
            self.assertEqual(service.get("stop_signal", "SIGTERM"), "SIGTERM")
            self.assertGreater(files.duration_seconds(service["stop_grace_period"]), grace + 5,
                               f"compose {name}: stop_grace_period vs --shutdown_grace_seconds")
        grace = int(effective(D.k8s_linserve_args())["shutdown_grace_seconds"])
        pre_stop = D.container["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(pre_stop[0], "sleep")
        self.assertGreater(D.pod["spec"]["terminationGracePeriodSeconds"],
                           int(pre_stop[1]) + grace + 5,
                           "terminationGracePeriodSeconds vs preStop + --shutdown_grace_seconds")

    def test_engine_threads_fit_the_cpu_limit(self):
        threads = int(effective(D.k8s_linserve_args())["threads"])
        self.assertGreater(threads, 0)
        self.assertLessEqual(threads, files.cpu_cores(D.container["resources"]["limits"]["cpu"]))

    def test_image_layout_matches_the_repos_dockerfile(self):
        image = files.dockerfile_facts(source("Dockerfile").read_text())
        if not image["entrypoint"] or image["entrypoint"][0] != "/usr/local/bin/linserve":
            self.skipTest("the Dockerfile does not run /usr/local/bin/linserve yet")
        self.assertKnown(image["entrypoint"][1:], D.server_flags, "Dockerfile ENTRYPOINT")
        entry = effective(image["entrypoint"][1:])
        setups = [(f"compose {n}", effective(s["command"])) for n, s in D.compose_linserve.items()]
        setups.append(("kubernetes", effective(D.k8s_linserve_args())))
        for where, flags in setups:
            self.assertEqual(flags["model"], entry["model"], f"{where}: the image's model")
            for port in ports(flags):
                self.assertIn(port, image["expose"], f"{where}: port {port} not EXPOSEd")
        for name, service in D.compose_linserve.items():
            self.assertIn(service["healthcheck"]["test"][1], image["copied"], name)
        self.assertEqual(D.pod["spec"]["securityContext"]["runAsUser"], image["uid"])


class PortsTest(unittest.TestCase):
    def test_compose_ports_agree(self):
        grpc_upstreams, http_upstreams = [], []
        for name, service in D.compose_linserve.items():
            grpc, http, metrics = ports(effective(service["command"]))
            self.assertEqual({int(p) for p in service["expose"]}, {grpc, http, metrics}, name)
            health = effective(service["healthcheck"]["test"][3:])
            self.assertEqual(files.port_of(health["server"]), grpc, f"{name} healthcheck")
            grpc_upstreams.append(f"{name}:{grpc}")
            http_upstreams.append(f"{name}:{http}")
        targets = [t for job in D.prometheus["scrape_configs"] if job["job_name"] == "linserve"
                   for sc in job["static_configs"] for t in sc["targets"]]
        expected = [f"{name}:{effective(s['command'])['metrics_port']}"
                    for name, s in D.compose_linserve.items()]
        self.assertEqual(sorted(targets), sorted(expected))
        nginx = NginxFronts(source("deploy/compose/nginx/linserve.conf").read_text())
        self.assertEqual(sorted(nginx.upstreams[nginx.grpc_upstream()]), sorted(grpc_upstreams))
        for route in HTTP_ROUTES:
            target = nginx.http_location(route).value("proxy_pass")
            self.assertEqual(sorted(nginx.upstreams[target.removeprefix("http://")]),
                             sorted(http_upstreams), f"nginx location {' '.join(route)}")
        published = {str(p).split(":")[-1] for p in D.compose_services["nginx"]["ports"]}
        for server in (nginx.grpc, nginx.http):
            self.assertIn(nginx.listen(server).split(":")[-1], published)

    def test_kubernetes_ports_agree(self):
        flags = effective(D.k8s_linserve_args())
        grpc, http, metrics = ports(flags)
        # HTTP probes go to the health listener, which API clients cannot fill.
        health = files.port_of(flags["health_listen"])
        container_ports = {p["name"]: p["containerPort"] for p in D.container["ports"]}
        self.assertEqual(container_ports,
                         {"grpc": grpc, "http": http, "metrics": metrics, "health": health})
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if "grpc" in D.container[probe]:
                self.assertEqual(D.container[probe]["grpc"]["port"], grpc, probe)
            else:
                get = D.container[probe]["httpGet"]
                port = get["port"]
                self.assertEqual(container_ports[port] if isinstance(port, str) else port, health,
                                 probe)
                self.assertEqual(get["path"], "/health", probe)
        annotations = D.pod["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertEqual(int(annotations["prometheus.io/port"]), metrics)
        self.assertEqual(annotations["prometheus.io/path"], "/metrics")
        service = D.k8s[("Service", "linserve")]
        by_name = {p["name"]: p for p in service["spec"]["ports"]}
        self.assertEqual(set(by_name), {"grpc", "http", "metrics"})
        for name, port in by_name.items():
            target = port["targetPort"]
            self.assertEqual(container_ports[target] if isinstance(target, str) else target,
                             container_ports[name], f"Service port {name}")
        self.assertEqual(by_name["grpc"]["appProtocol"], "grpc")
        self.assertEqual(by_name["http"]["appProtocol"], "http")
        monitor = D.k8s[("ServiceMonitor", "linserve")]
        for endpoint in monitor["spec"]["endpoints"]:
            self.assertIn(endpoint["port"], by_name)
            self.assertEqual(by_name[endpoint["port"]]["port"], by_name["metrics"]["port"])
        for ingress, port in (("linserve", "grpc"), ("linserve-http", "http")):
            for rule in D.k8s[("Ingress", ingress)]["spec"]["rules"]:
                for path in rule["http"]["paths"]:
                    backend = path["backend"]["service"]
                    self.assertEqual(backend["name"], "linserve", ingress)
                    self.assertEqual(backend["port"].get("name"), port, ingress)

    def test_selectors_match_the_pods(self):
        for kind, name in (("Deployment", "linserve"), ("StatefulSet", "redis")):
            workload = D.k8s[(kind, name)]
            labels = workload["spec"]["template"]["metadata"]["labels"]
            selector = workload["spec"]["selector"]["matchLabels"]
            self.assertLessEqual(selector.items(), labels.items(), f"{kind} {name}")
        pod_labels = D.pod["metadata"]["labels"]
        for selector in (D.k8s[("Service", "linserve")]["spec"]["selector"],
                         D.k8s[("PodDisruptionBudget", "linserve")]["spec"]["selector"]["matchLabels"]):
            self.assertLessEqual(selector.items(), pod_labels.items())
        monitor = D.k8s[("ServiceMonitor", "linserve")]["spec"]["selector"]["matchLabels"]
        self.assertLessEqual(monitor.items(),
                             D.k8s[("Service", "linserve")]["metadata"]["labels"].items())
        redis_labels = D.k8s[("StatefulSet", "redis")]["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(D.k8s[("Service", "redis")]["spec"]["selector"].items(),
                             redis_labels.items())

    def test_store_points_at_the_redis_that_ships_beside_it(self):
        for name, service in D.compose_linserve.items():
            host, port = files.redis_url_host_port(effective(service["command"])["store"])
            self.assertIn(host, D.compose_services, f"compose {name} --store host")
            options = files.redis_options(D.compose_services[host]["command"])
            self.assertEqual(port, int(options.get("port", 6379)))
            self.assertEqual(service["depends_on"][host]["condition"], "service_healthy")
        host, port = files.redis_url_host_port(effective(D.k8s_linserve_args())["store"])
        redis_service = D.k8s[("Service", host)]
        self.assertIn(port, [p["port"] for p in redis_service["spec"]["ports"]])

    def test_redis_never_evicts_sessions(self):
        compose = files.redis_options(D.compose_services["redis"]["command"])
        k8s = files.redis_options(D.redis_k8s_container()["args"])
        for options in (compose, k8s):
            self.assertEqual(options["maxmemory-policy"], "noeviction")
            self.assertEqual(options["appendonly"], "yes")
        limit = files.memory_bytes(D.redis_k8s_container()["resources"]["limits"]["memory"])
        self.assertLess(files.memory_bytes(k8s["maxmemory"]), limit * 3 // 4,
                        "maxmemory leaves room under the memory limit for the AOF rewrite's fork")


class AffinityTest(unittest.TestCase):
    HEADER = "x-session-id"

    def test_the_client_sends_the_header_the_routers_hash(self):
        client_sources = "".join(p.read_text() for p in source("client").glob("*.cc"))
        self.assertIn(f'"{self.HEADER}"', client_sources)
        variable = "$http_" + self.HEADER.replace("-", "_")
        for name, protocol in (("linserve", "GRPC"), ("linserve-http", "HTTP")):
            ingress = D.k8s[("Ingress", name)]["metadata"]["annotations"]
            self.assertEqual(ingress["nginx.ingress.kubernetes.io/upstream-hash-by"], variable)
            self.assertEqual(ingress["nginx.ingress.kubernetes.io/backend-protocol"], protocol)
        for where, nginx in nginx_configs().items():
            self.assertEqual(len(nginx.upstream_blocks), 2, where)
            grpc = nginx.upstream_blocks[0]
            self.assertEqual(grpc.value("hash"), f"{variable} consistent", f"{where}: gRPC")
            # HTTP hashes the session of the path where a session route
            # names one, else the header.
            http = nginx.upstream_blocks[1]
            key = http.value("hash").removesuffix(" consistent")
            maps = [m for m in nginx.conf.all("map") if m.args[1] == key]
            self.assertEqual(len(maps), 1, f"{where}: no map defines {key}")
            self.assertEqual(maps[0].args[0], "$uri", where)
            self.assertEqual(maps[0].value("default"), variable, where)

    def test_nginx_hashes_a_session_routes_path_as_its_header(self):
        """A real nginx with the template's HTTP front, before two stand-in
        replicas that answer which one they are: every call on a session,
        by path or by header, reaches the same one, and the sessions spread
        over both."""
        if shutil.which("nginx") is None:
            self.skipTest("nginx is not installed (scripts/setup installs it)")
        servers = []
        for name in ("a", "b"):
            class Echo(http.server.BaseHTTPRequestHandler):
                replica = name

                def respond(self):
                    body = self.replica.encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                do_GET = do_POST = respond

                def log_message(self, *args):
                    pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
        with tempfile.TemporaryDirectory(prefix="linserve-nginx-") as work:
            grpc_port, http_port = live.free_port(), live.free_port()
            replicas = [f"127.0.0.1:{live.free_port()}:{s.server_address[1]}" for s in servers]
            rendered = subprocess.run(
                [str(source("deploy/nginx/render")), f"127.0.0.1:{grpc_port}",
                 f"127.0.0.1:{http_port}"] + replicas,
                capture_output=True, text=True, check=True).stdout
            pathlib.Path(work, "linserve.conf").write_text(rendered)
            pathlib.Path(work, "nginx.conf").write_text(
                f"daemon off; pid {work}/nginx.pid; error_log {work}/error.log;\n"
                "events {}\n"
                f"http {{ access_log off; client_body_temp_path {work}/body;"
                f" proxy_temp_path {work}/proxy; include {work}/linserve.conf; }}\n")
            nginx = subprocess.Popen(["nginx", "-p", work, "-c", f"{work}/nginx.conf"],
                                     stderr=subprocess.PIPE)
            try:
                def replica(path, session=None):
                    request = urllib.request.Request(f"http://127.0.0.1:{http_port}{path}")
                    if session:
                        request.add_header("x-session-id", session)
                    for _ in range(100):  # until nginx listens
                        try:
                            with urllib.request.urlopen(request, timeout=10) as answer:
                                return answer.read().decode()
                        except urllib.error.URLError:
                            if nginx.poll() is not None:
                                self.fail(f"nginx exited: {nginx.stderr.read().decode()}")
                            time.sleep(0.1)
                    self.fail("nginx did not answer")
                seen = set()
                for i in range(16):
                    session = f"{i:032x}"
                    by_header = replica("/v1/completions", session)
                    seen.add(by_header)
                    for path in (f"/v1/sessions/{session}", f"/v1/sessions/{session}/state",
                                 f"/v1/sessions/{session}/fork"):
                        self.assertEqual(replica(path), by_header, f"{path} left its session")
                self.assertEqual(seen, {"a", "b"}, "the sessions all hashed to one replica")
                for page in ("/", "/playground.js", "/playground.css"):
                    self.assertIn(replica(page), seen, f"nginx did not pass {page} on")
            finally:
                nginx.terminate()
                nginx.wait(timeout=10)
                for server in servers:
                    server.shutdown()
                    server.server_close()

    def test_compose_nginx_config_is_the_templates_rendering(self):
        replicas = [f"{name}:{grpc}:{http}" for name, s in D.compose_linserve.items()
                    for grpc, http, _ in [ports(effective(s["command"]))]]
        conf = source("deploy/compose/nginx/linserve.conf").read_text()
        nginx = NginxFronts(conf)
        command = [str(source("deploy/nginx/render")), "--stamp", nginx.listen(nginx.grpc),
                   nginx.listen(nginx.http)] + replicas
        rendered = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        self.assertEqual(conf, rendered, "deploy/compose/nginx/linserve.conf is not the output "
                         f"of {' '.join(command)}")
        self.assertNotIn("@", re.sub(r"(?m)^\s*#.*$", "", conf), "a placeholder left unfilled")
        mounts = D.compose_services["nginx"]["volumes"]
        self.assertIn("./nginx/linserve.conf:/etc/nginx/conf.d/default.conf:ro", mounts)


def nginx_configs() -> dict:
    """{name: NginxFronts} of the compose config and of the template
    rendered for two loopback replicas."""
    rendered = subprocess.run([str(source("deploy/nginx/render")), "127.0.0.1:50051",
                               "127.0.0.1:8080", "127.0.0.1:1:2", "127.0.0.1:3:4"],
                              capture_output=True, text=True, check=True).stdout
    return {"deploy/nginx/linserve.conf.template": NginxFronts(rendered),
            "deploy/compose/nginx/linserve.conf": NginxFronts(
                source("deploy/compose/nginx/linserve.conf").read_text())}


class HttpRoutingTest(unittest.TestCase):
    """The HTTP API through nginx and through ingress-nginx: its paths go to
    the replicas' HTTP ports over HTTP/1.1, and answers stream unbuffered
    (server-sent events token by token) for as long as a completion runs."""

    LONG = 600  # seconds: at least this for a streamed completion

    def test_nginx_routes_the_api_paths_unbuffered_to_the_http_upstream(self):
        for where, nginx in nginx_configs().items():
            grpc_upstream = nginx.grpc_upstream()
            for route in HTTP_ROUTES:
                what = f"{where}: location {' '.join(route)}"
                location = nginx.http_location(route)
                upstream = location.value("proxy_pass").removeprefix("http://")
                self.assertIn(upstream, nginx.upstreams, what)
                self.assertNotEqual(upstream, grpc_upstream, what)
                self.assertEqual(nginx.http_setting(location, "proxy_http_version"), "1.1", what)
                # Keep-alive to the replicas needs the client's Connection cleared.
                self.assertIn(["Connection", ""],
                              [d.args for d in location.all("proxy_set_header")
                               or nginx.http.all("proxy_set_header")], what)
                self.assertEqual(nginx.http_setting(location, "proxy_buffering"), "off", what)
                for timeout in ("proxy_read_timeout", "proxy_send_timeout"):
                    self.assertGreaterEqual(
                        files.nginx_seconds(nginx.http_setting(location, timeout) or "60s"),
                        self.LONG, f"{what}: {timeout}")
            self.assertNotIn("http2", nginx.http.all("listen")[0].args, where)
            # A session import's body is a state file, up to linserve's
            # --max_state_bytes (64 MiB): nginx must pass it for linserve to judge.
            imports = nginx.http_location(("=", "/v1/sessions/import"))
            self.assertEqual(imports.value("proxy_pass"), nginx.http_location(("/v1/",)).value("proxy_pass"))
            size = imports.value("client_max_body_size")  # nginx: k, m, g are powers of 1024
            self.assertGreater(int(size[:-1]) << {"k": 10, "m": 20, "g": 30}[size[-1].lower()],
                               64 << 20)

    def test_the_http_ingress_routes_the_api_paths_unbuffered(self):
        grpc = D.k8s[("Ingress", "linserve")]
        http = D.k8s[("Ingress", "linserve-http")]
        annotations = http["metadata"]["annotations"]
        prefix = "nginx.ingress.kubernetes.io/"
        self.assertEqual(annotations[prefix + "proxy-buffering"], "off")
        for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
            self.assertGreaterEqual(int(annotations[prefix + timeout]), self.LONG, timeout)
        paths = {(p["path"], p["pathType"]) for rule in http["spec"]["rules"]
                 for p in rule["http"]["paths"]}
        expected = {(route[-1], "Exact" if route[0] == "=" else "Prefix") for route in HTTP_ROUTES}
        self.assertEqual(paths, expected)
        # One host, one certificate: ingress-nginx merges the two Ingresses.
        self.assertEqual([r["host"] for r in http["spec"]["rules"]],
                         [r["host"] for r in grpc["spec"]["rules"]])
        self.assertEqual(http["spec"]["tls"], grpc["spec"]["tls"])


class LiveServerTest(unittest.TestCase):
    """linserve and Redis started with the deployments' own flags and
    options (addresses, model directory and store host moved here)."""

    LOCAL = {"listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0", "metrics_host": "127.0.0.1",
             "metrics_port": "0"}

    def local_args(self, args: list, redis: live.Redis, flagfile: str = None) -> list:
        out = []
        for arg in args:
            name, value = files.parse_flags([arg])[0]
            if name in self.LOCAL:
                value = self.LOCAL[name]
            elif name == "flagfile":
                value = flagfile
            elif name == "model":
                value = str(source("models", "default"))
            elif name == "store":
                host, port = files.redis_url_host_port(value)
                value = value.replace(f"//{host}:{port}", f"//127.0.0.1:{redis.port}", 1)
            out.append(f"--{name}" if value is None else f"--{name}={value}")
        return out

    def client(self, server: live.Linserve, *args) -> list:
        return [ARGS.client, args[0], f"--server=127.0.0.1:{server.port}"] + list(args[1:])

    def exercise(self, server: live.Linserve, redis: live.Redis, prefix: str):
        """Gives every labelled family a sample (a family without one is not
        exported): a session, stored in Redis under the --store prefix; a
        turn on it; and a second turn on it while the first runs, refused as
        session_busy."""
        created = subprocess.run(self.client(server, "session", "create", "--prompt=ROMEO:"),
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(created.returncode, 0, created.stderr)
        session = json.loads(created.stdout)["id"]
        self.assertEqual(len(redis.keys(f"{prefix}:session:*")), 1, "the session is in Redis")
        long_turn = subprocess.Popen(
            self.client(server, "generate", f"--session={session}", "--max_new_tokens=4096",
                        "--ignore_eos", ""),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            self.assertTrue(long_turn.stdout.read(1), "the first turn streams")
            busy = subprocess.run(self.client(server, "generate", f"--session={session}", "x"),
                                  capture_output=True, text=True, timeout=60)
            self.assertNotEqual(busy.returncode, 0, "a second turn on a busy session")
            self.assertRegex(busy.stderr, "FAILED_PRECONDITION|ABORTED")
        finally:
            long_turn.kill()
            long_turn.wait()
            long_turn.stdout.close()

    def stop_cleanly(self, server: live.Linserve):
        self.assertEqual(server.stop(), 0, "SIGTERM drains and exits 0")

    def test_compose_replica_serves_with_its_flags_and_passes_its_healthcheck(self):
        service = next(iter(D.compose_linserve.values()))
        redis_options = files.redis_options(D.compose_services["redis"]["command"])
        redis = live.Redis(redis_options)
        self.addCleanup(redis.stop)
        self.assertEqual(redis.config_get("maxmemory-policy"), redis_options["maxmemory-policy"])
        server = live.Linserve(ARGS.linserve, self.local_args(service["command"], redis))
        try:
            test = service["healthcheck"]["test"]
            args = [f"--server=127.0.0.1:{server.port}" if a.startswith("--server=") else a
                    for a in test[3:]]
            result = subprocess.run([ARGS.client, test[2]] + args, capture_output=True,
                                    text=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            # nginx's HTTP locations reach this port: /health answers there.
            status, body = server.http_get("/health")
            self.assertEqual((status, json.loads(body).get("status")), (200, "ok"), body)
        finally:
            self.stop_cleanly(server)

    def test_kubernetes_pod_serves_with_its_flags_and_the_dashboards_metrics(self):
        redis_options = files.redis_options(D.redis_k8s_container()["args"])
        redis = live.Redis(redis_options)
        self.addCleanup(redis.stop)
        self.assertEqual(redis.config_get("maxmemory-policy"), redis_options["maxmemory-policy"])
        # The ConfigMap's text goes through --flagfile as in the pod.
        with tempfile.TemporaryDirectory(prefix="linserve-deploy-") as scratch:
            flagfile = pathlib.Path(scratch, "linserve.flags")
            flagfile.write_text("\n".join(
                self.local_args(files.flagfile_lines(D.k8s_flagfile()[1]), redis)) + "\n")
            args = self.local_args(D.container["args"], redis, flagfile=str(flagfile))
            server = live.Linserve(ARGS.linserve, args)
            try:
                for name in ("startupProbe", "readinessProbe", "livenessProbe"):
                    if "httpGet" in D.container[name]:
                        status, body = server.http_get(D.container[name]["httpGet"]["path"])
                        self.assertEqual(status, 200, f"{name}: {body}")
                store = effective(D.k8s_linserve_args())["store"]
                self.exercise(server, redis, re.search(r"prefix=([^&]+)", store).group(1))
                exported = files.exposition_names(server.metrics())
            finally:
                self.stop_cleanly(server)
        self.assertIn("linserve_requests_total", exported)  # the scrape itself worked
        dashboard = json.loads(
            source("deploy/compose/grafana/dashboards/linserve.json").read_text())
        queried = set()
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                names = files.promql_metric_names(target["expr"])
                self.assertTrue(names, f"{panel['title']}: no metric in {target['expr']!r}")
                for name in names:
                    self.assertIn(name, exported,
                                  f"{panel['title']}: {name} is not in linserve's /metrics")
                queried |= names
        # What the dashboard must show (deploy issue): each named family.
        for family in ("requests_total", "rejections_total", "generated_tokens_total",
                       "time_to_first_token_seconds_bucket",
                       "time_per_output_token_seconds_bucket", "queue_depth", "active_requests",
                       "batch_size_bucket", "sessions", "session_save_seconds_bucket",
                       "session_restore_seconds_bucket"):
            self.assertIn("linserve_" + family, queried)


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--linserve", required=True, help="the built linserve binary")
    parser.add_argument("--client", required=True, help="the built linserve-client binary")
    parser.add_argument("--source_dir", required=True, help="the repository root")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
