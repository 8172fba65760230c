#!/usr/bin/env bash
# Create a CA and per-component certificates for mutual TLS between Caravanserai's processes.
#
#   deploy/certs.sh DIR [NAME ...]
#
# NAME is an identity: `apiserver` (server certificate; add hosts with APISERVER_HOSTS="a.example,10.0.0.5"; with
# several apiservers list all of them: one certificate serves every apiserver), `etcd` (the members' server and
# peer certificate; their hosts in ETCD_HOSTS), `admin`, `controller:<name>`, `node:<name>` (node certificates
# also serve the agent's log service: add the node's hosts with NODE_HOSTS) or any user name. The identity is the certificate's common name
# and the apiserver authorizes by it. Default names: apiserver admin controller:manager.
# Output per NAME (':' becomes '-' in file names): DIR/NAME.crt, DIR/NAME.key; the CA is DIR/ca.crt, DIR/ca.key.
# Existing files are kept, so the script can add identities to an existing CA.
set -euo pipefail
dir=${1:?usage: deploy/certs.sh DIR [NAME ...]}
shift || true
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(apiserver admin controller:manager)
days=${CERT_DAYS:-825}
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=caravanserai-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
fi
for name in "${names[@]}"; do
  file=${name//:/-}
  [ -f "$dir/$file.crt" ] && continue
  san="DNS:localhost,IP:127.0.0.1,IP:::1"
  hosts=""
  [ "$name" = apiserver ] && hosts=${APISERVER_HOSTS:-}
  [ "$name" = etcd ] && hosts=${ETCD_HOSTS:-}
  [[ "$name" == node:* ]] && hosts=${NODE_HOSTS:-}
  if [ -n "$hosts" ]; then
    IFS=',' read -ra extra <<<"$hosts"
    for h in "${extra[@]}"; do
      if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san="$san,IP:$h"; else san="$san,DNS:$h"; fi
    done
  fi
  ext=$(mktemp)
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' "$san" >"$ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$dir/$file.key" -out "$dir/$file.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$file.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -extfile "$ext" -out "$dir/$file.crt" 2>/dev/null
  rm -f "$dir/$file.csr" "$ext"
  echo "$dir/$file.crt ($name)"
done
