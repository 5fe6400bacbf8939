#!/usr/bin/env python3
"""The waiting room of scripts/bench-instructions.sh's pass counts: makes the
keys stockd verifies passes with, and mints passes (contract §20) outside
the measured window, so the api's count is its verifying only.

  mint_passes.py keys <dir>
      writes <dir>/pass-hs256.secret (48 random bytes, hex) and
      <dir>/pass-ed25519.pem (private, PKCS#8) + <dir>/pass-ed25519.pub.pem
      (public, SPKI: what stockd is given, as a waiting room would give it)
  mint_passes.py mint <hs256|eddsa> <key file> <kid> <sku> <first user> <count>
      prints <count> lines `<user> <pass>`: users <first user>.., each pass
      for that user and <sku>, a pass id of its own, valid from a minute ago
      for an hour

HS256 by the standard library's hmac; EdDSA by `cryptography` (Ed25519).
"""

import base64
import hashlib
import hmac
import json
import os
import sys
import time

# Passes are valid from this long ago (a clock a little behind stockd's must
# not see them before nbf) until this long from now (the whole script).
VALID_BEFORE_SECS = 60
VALID_FOR_SECS = 3600


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def keys(directory):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    with open(os.path.join(directory, "pass-hs256.secret"), "w") as f:
        f.write(os.urandom(48).hex() + "\n")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with open(os.path.join(directory, "pass-ed25519.pem"), "wb") as f:
        f.write(pem)
    with open(os.path.join(directory, "pass-ed25519.pub.pem"), "wb") as f:
        f.write(public)


def signer(alg, key_file):
    if alg == "hs256":
        with open(key_file, "rb") as f:
            secret = f.read()
        if secret.endswith(b"\n"):
            secret = secret[:-1]
        return "HS256", lambda msg: hmac.new(secret, msg, hashlib.sha256).digest()
    if alg == "eddsa":
        from cryptography.hazmat.primitives import serialization

        with open(key_file, "rb") as f:
            private = serialization.load_pem_private_key(f.read(), password=None)
        return "EdDSA", private.sign
    raise SystemExit(f"unknown alg {alg}")


def compact(value):
    """JSON as JWT libraries write it (PyJWT, jose, jsonwebtoken): no spaces."""
    return json.dumps(value, separators=(",", ":")).encode()


def mint(alg, key_file, kid, sku, first, count):
    name, sign = signer(alg, key_file)
    now = int(time.time())
    head = b64url(compact({"alg": name, "typ": "JWT", "kid": kid}))
    out = []
    for user in range(first, first + count):
        claims = {
            "sub": str(user),
            "jti": f"{alg}-{user}",
            "nbf": now - VALID_BEFORE_SECS,
            "exp": now + VALID_FOR_SECS,
            "stockd_skus": [sku],
        }
        signing_input = f"{head}.{b64url(compact(claims))}"
        signature = b64url(sign(signing_input.encode()))
        out.append(f"{user} {signing_input}.{signature}")
    print("\n".join(out))


def main(argv):
    if len(argv) == 3 and argv[1] == "keys":
        keys(argv[2])
        return 0
    if len(argv) == 8 and argv[1] == "mint":
        mint(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), int(argv[7]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
