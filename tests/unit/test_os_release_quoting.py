"""/etc/os-release as hosts print it: os-release(5) values are shell-style, so double
quotes, single quotes, backslash escapes or none, and the kit must read them all alike."""

from types import SimpleNamespace

import pytest

from beekeeper.facts.host import parse_os_release, parse_wsl
from beekeeper.tasks.nvidia_repos import cuda_distro

# Ubuntu 24.04 as shipped (double quotes on some values, none on others)
UBUNTU_2404 = '''PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
UBUNTU_CODENAME=noble
LOGO=ubuntu-logo
'''

# the same release written by an image build or config tool with single quotes
UBUNTU_2404_SINGLE = '''PRETTY_NAME='Ubuntu 24.04.1 LTS'
NAME='Ubuntu'
VERSION_ID='24.04'
VERSION='24.04.1 LTS (Noble Numbat)'
ID='ubuntu'
ID_LIKE='debian'
'''

# Debian 12 as shipped, then with backslash escapes and indented comments
DEBIAN_12 = '''PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
'''
DEBIAN_12_ESCAPED = '''  # written by hand
PRETTY_NAME=Debian\\ GNU/Linux\\ 12\\ \\(bookworm\\)
ID=debian
VERSION_ID=12
NAME="Debian \\"GNU\\"/Linux"
'''


def _lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.mark.parametrize("text,os_id,version", [
    (UBUNTU_2404, "ubuntu", "24.04"),
    (UBUNTU_2404_SINGLE, "ubuntu", "24.04"),
    (DEBIAN_12, "debian", "12"),
    (DEBIAN_12_ESCAPED, "debian", "12"),
])
def test_every_quoting_os_release_allows_reads_alike(text, os_id, version):
    out = parse_os_release(_lines(text))
    assert (out.id, out.version_id) == (os_id, version)


def test_single_quoted_ubuntu_gets_its_cuda_repository():
    wsl = parse_wsl(["kernel=6.8.0-45-generic", "dxg=0", "wslconf_systemd="])
    facts = SimpleNamespace(os=parse_os_release(_lines(UBUNTU_2404_SINGLE)), wsl=wsl)
    assert cuda_distro(facts) == "ubuntu2404"  # type: ignore[arg-type]


def test_an_unbalanced_quote_is_read_not_a_traceback():
    out = parse_os_release(["ID='ubuntu", 'VERSION_ID="24.04'])
    assert (out.id, out.version_id) == ("ubuntu", "24.04")
