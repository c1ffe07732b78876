"""Reads deploy/: every YAML document, the compose services and Kubernetes
objects, the flags each gives linserve, and the metric names a PromQL
expression queries. Plain functions of the files; manifests_test.py holds
the checks."""
import json
import pathlib
import re

import yaml


def load_yaml_documents(root: pathlib.Path) -> dict:
    """{path: [document, ...]} for every .yaml/.yml under root (multi-document
    files give several; empty documents are dropped)."""
    documents = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml")):
        try:
            documents[path] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as error:
            raise ValueError(f"{path}: {error}") from error
    return documents


def parse_flags(args: list) -> list:
    """[(name, value)] of `--name=value` / `--name` arguments (value None).
    Raises ValueError for anything else, so a stray positional argument or a
    single-dash flag cannot hide from the checks."""
    flags = []
    for arg in args:
        match = re.fullmatch(r"--([A-Za-z0-9_]+)(?:=(.*))?", str(arg), re.DOTALL)
        if not match:
            raise ValueError(f"not a --flag: {arg!r}")
        flags.append((match.group(1), match.group(2)))
    return flags


def flagfile_lines(text: str) -> list:
    """The flags of an absl flagfile: one per line, '#' comments and blank
    lines skipped."""
    return [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]


def help_flags(help_text: str) -> set:
    """Flag names an absl --help lists ("  --name (help); default: ...")."""
    return set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", help_text, re.MULTILINE))


def port_of(address: str) -> int:
    """The port of HOST:PORT (or [V6]:PORT)."""
    return int(address.rsplit(":", 1)[1])


def redis_url_host_port(url: str) -> tuple:
    """(host, port) of redis://HOST:PORT[/DB][?prefix=NAME]."""
    match = re.fullmatch(r"redis://([^:/?]+):(\d+)(/\d+)?(\?.*)?", url)
    if not match:
        raise ValueError(f"not a redis://HOST:PORT URL: {url!r}")
    return match.group(1), int(match.group(2))


def duration_seconds(text) -> float:
    """Seconds of a compose duration ("45s", "1m30s", "500ms") or a number."""
    if isinstance(text, (int, float)):
        return float(text)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def nginx_seconds(text: str) -> float:
    """Seconds of an nginx time ("1h", "3600s", "90", "500ms"; no unit: s)."""
    return float(text) if re.fullmatch(r"\d+", text) else duration_seconds(text)


class NginxDirective:
    """One directive of an nginx configuration: its name, its arguments
    (quotes removed) and, for a block (`server { ... }`), its directives."""

    def __init__(self, name: str, args: list, block: list = None):
        self.name, self.args, self.block = name, args, block

    def all(self, name: str) -> list:
        """The directives called `name` directly in this block."""
        return [d for d in self.block or [] if d.name == name]

    def value(self, name: str, default=None):
        """The arguments, joined by spaces, of the last `name` directly in
        this block (as nginx, a later one wins), or `default`."""
        found = self.all(name)
        return " ".join(found[-1].args) if found else default


_NGINX_TOKEN = re.compile(r"""\s+|#[^\n]*|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[{};]|[^\s{};'"#]+""")


def nginx_config(text: str) -> NginxDirective:
    """An nginx configuration (a whole file or one `include`d in `http`) as
    a tree of directives under a root block named "". Raises ValueError for
    text it cannot split into directives (unbalanced braces, a directive
    without its ';'), so a broken file cannot pass the checks."""
    pieces = _NGINX_TOKEN.findall(text)
    if "".join(pieces) != text:
        raise ValueError("nginx configuration with characters outside any token")
    tokens = [p for p in pieces if p.strip() and not p.startswith("#")]
    stack = [NginxDirective("", [], [])]
    words = []
    for token in tokens:
        if token in (";", "{"):
            if not words:
                raise ValueError(f"nginx configuration: {token!r} without a directive")
            directive = NginxDirective(words[0], words[1:], [] if token == "{" else None)
            stack[-1].block.append(directive)
            if token == "{":
                stack.append(directive)
            words = []
        elif token == "}":
            if words or len(stack) == 1:
                raise ValueError(f"nginx configuration: unexpected '}}' after {words}")
            stack.pop()
        else:
            words.append(token[1:-1] if token[0] in "'\"" else token)
    if words or len(stack) != 1:
        raise ValueError("nginx configuration: unterminated directive or block")
    return stack[0]


def cpu_cores(quantity) -> float:
    """Cores of a Kubernetes CPU quantity ("2", "500m", 1.5)."""
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def memory_bytes(quantity) -> int:
    """Bytes of a Kubernetes memory quantity ("2Gi", "512Mi", "1G") or a
    Redis one ("1gb", "512mb")."""
    text = str(quantity).strip()
    units = {"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40,
             "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
             "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    if not match:
        raise ValueError(f"not a memory quantity: {text!r}")
    unit = match.group(2).lower()
    if unit and unit not in units:
        raise ValueError(f"unknown memory unit in {text!r}")
    return int(match.group(1)) * units.get(unit, 1)


def redis_options(args: list) -> dict:
    """{option: value} of redis-server arguments ("--maxmemory", "1gb", ...),
    after the leading "redis-server" if any."""
    args = [str(a) for a in args]
    if args and args[0] == "redis-server":
        args = args[1:]
    options = {}
    i = 0
    while i < len(args):
        if not args[i].startswith("--"):
            raise ValueError(f"redis-server argument out of place: {args[i]!r}")
        name = args[i][2:]
        values = []
        i += 1
        while i < len(args) and not args[i].startswith("--"):
            values.append(args[i])
            i += 1
        options[name] = " ".join(values)
    return options


def dockerfile_facts(text: str) -> dict:
    """What the runtime image offers: its ENTRYPOINT (exec form, as a list),
    EXPOSEd ports, the files COPY puts into /usr/local/bin, and the uid
    `useradd --uid` gives its user (None where absent)."""
    text = re.sub(r"\\\n\s*", " ", text)  # continuation lines
    entrypoints = re.findall(r"^ENTRYPOINT\s+(\[.*\])\s*$", text, re.MULTILINE)
    expose = [int(p.split("/")[0]) for line in re.findall(r"^EXPOSE\s+(.*)$", text, re.MULTILINE)
              for p in line.split()]
    copied = set()
    for line in re.findall(r"^COPY\s+(.*)$", text, re.MULTILINE):
        parts = [p for p in line.split() if not p.startswith("--")]
        destination = parts[-1]
        for src in parts[:-1]:
            copied.add(destination + src.rsplit("/", 1)[-1] if destination.endswith("/")
                       else destination)
    uid = re.search(r"useradd\b[^\n]*--uid\s+(\d+)", text)
    return {"entrypoint": json.loads(entrypoints[-1]) if entrypoints else None,
            "expose": expose, "copied": copied, "uid": int(uid.group(1)) if uid else None}


_PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                    "group_left", "group_right", "inf", "nan", "Inf", "NaN"}


def promql_metric_names(expr: str) -> set:
    """Metric names a PromQL expression selects: identifiers that are not
    functions, keywords, label names or Grafana variables."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range and subquery selectors
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # Grafana variables
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"(?<![\w.])(\d+(ms|[smhdwy]))+\b", "", expr)  # durations (offset 5m)
    expr = re.sub(r"(?<![\w.])\d+(\.\d+)?([eE][+-]?\d+)?", "", expr)  # numbers
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if expr[match.end():].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group() not in _PROMQL_KEYWORDS:
            names.add(match.group())
    return names


def exposition_names(text: str) -> set:
    """Every name a Prometheus text exposition offers to a query: the sample
    names, and each declared family's own name with, for histograms and
    summaries, its _bucket/_sum/_count series (a labelled family has no
    sample until its first label set is used)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            names.add(family)
            if kind in ("histogram", "summary"):
                names.update(family + s for s in ("_bucket", "_sum", "_count"))
        elif line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group())
    return names
