"""The released gates' weights, pinned in the package's own code (``memgate.model.pretrained``).

A by-name load of a released gate (``MemGate.from_pretrained("memgate-minilm-l6")``, the default
gate of ``memgate.Memory``, HTTP and MCP) hashes ``model.safetensors`` and refuses anything but
the sha256 below: the hash does not sit beside the weights it vouches for, so an edited copy
cannot re-vouch for itself. ``make release`` rewrites this file when it exports the gate; nothing
else does.
"""

RELEASED_WEIGHTS_SHA256 = {
    "memgate-minilm-l6": "f1ce26775c1c4b2ad2903c45e1059752ea0d607e05df5f3984729a9c9ff59f90",
}
