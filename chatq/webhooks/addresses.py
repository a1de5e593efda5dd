"""Which addresses a webhook may reach, one rule for the URL's host at creation and for every
address a name resolves to when connecting (chatq/webhooks/net.py): only a globally routable
unicast address, and when an IPv6 address carries an IPv4 one (NAT64, 6to4, Teredo, IPv4
mapped), that IPv4 address must be one too."""

from __future__ import annotations

import ipaddress

from chatq.config import IPAddress, literal_address

LOCAL_NAMES = ("localhost", "localhost.")
# RFC 4291: global unicast. Everything outside it (::/8 with the IPv4-compatible and SIIT
# forms, 64:ff9b:1::/48, fc00::/7, fe80::/10, fec0::/10, ff00::/8 ...) is refused.
GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
# RFC 6052's well-known NAT64 prefix: the translator connects to the IPv4 address in the
# last 32 bits, so that address decides (RFC 6052 forbids it for non-global addresses).
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses a connection to `address` may reach through a translator or a
    tunnel: IPv4 mapped, NAT64's well-known prefix, 6to4, Teredo (server and client)."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address in NAT64:
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    return ()


def address_allowed(address: IPAddress) -> bool:
    """Whether a webhook may connect to `address`: globally routable unicast, and so is every
    IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv4Address):
        return address.is_global and not address.is_multicast
    carried = embedded_ipv4(address)
    if address.ipv4_mapped is not None or address in NAT64:
        return address_allowed(carried[0])
    return (
        address in GLOBAL_UNICAST
        and address.is_global
        and all(address_allowed(inner) for inner in carried)
    )


def literal_refused(host: str) -> bool:
    """Whether `host`, as written, is certainly refused (an address `address_allowed` refuses,
    or localhost); names are resolved and checked only when connecting."""
    name = host.lower()
    if name in LOCAL_NAMES or name.endswith((".localhost", ".localhost.")):
        return True
    try:
        address = literal_address(name)
    except ValueError:
        return False  # not a host at all: the URL's check says so
    return address is not None and not address_allowed(address)
