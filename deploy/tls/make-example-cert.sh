#!/usr/bin/env bash
# A self-signed EXAMPLE certificate for trying deploy/compose.yaml on your machine.
# Not for a public server: use a certificate from your CA (e.g. Let's Encrypt) there.
#
#   bash deploy/tls/make-example-cert.sh [OUT_DIR] [HOSTNAME]
#
# Writes OUT_DIR/example.crt and OUT_DIR/example.key (default: next to this script;
# both are git-ignored, so no private key is ever committed), valid 30 days for
# HOSTNAME (default localhost), 127.0.0.1 and ::1.
set -euo pipefail
out="${1:-$(dirname "$0")}"
host="${2:-localhost}"
mkdir -p "$out"
umask 077
openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days 30 \
    -subj "/CN=$host/O=solrace example (self-signed, not for production)" \
    -addext "subjectAltName=DNS:$host,IP:127.0.0.1,IP:::1" \
    -keyout "$out/example.key" -out "$out/example.crt" 2>/dev/null
chmod 0644 "$out/example.crt"   # the key stays 0600: nginx reads it as root at start
echo "wrote $out/example.crt and $out/example.key (self-signed, for $host; example only)"
