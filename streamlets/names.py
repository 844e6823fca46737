"""Name rules shared by ports, streamlet instances, volume mounts and config keys."""

import re

# RFC 1123 label, as Kubernetes and Cloudflow use for streamlet and port names.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_MAX = 63

# Config-parameter keys: Cloudflow allows letters, digits and dashes/dots inside.
CONFIG_KEY = re.compile(r"^[a-zA-Z][-a-zA-Z0-9_.]*[a-zA-Z0-9]$|^[a-zA-Z]$")


def is_dns_label(name: str) -> bool:
    """True if `name` is a DNS label (RFC 1123): lowercase letters, digits and '-', at most 63."""
    return isinstance(name, str) and len(name) <= DNS_LABEL_MAX and bool(DNS_LABEL.match(name))


def is_config_key(key: str) -> bool:
    """True if `key` is a valid config-parameter key (letters, digits, '-', '_' and '.')."""
    return isinstance(key, str) and bool(CONFIG_KEY.match(key))
