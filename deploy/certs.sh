#!/usr/bin/env bash
# Create the CAs and per-component certificates for mutual TLS between Caravanserai's processes.
#
#   deploy/certs.sh DIR [NAME ...]
#
# NAME is an identity: `apiserver` (server certificate; add hosts with APISERVER_HOSTS="a.example,10.0.0.5"; with
# several apiservers list all of them: one certificate serves every apiserver), `admin`, `controller:<name>`,
# `node:<name>` (node certificates also serve the agent's log service: add the node's hosts with NODE_HOSTS) or
# any user name. The identity is the certificate's common name and the apiserver authorizes by it. These come
# from the fleet CA, DIR/ca.crt and DIR/ca.key.
#
# Two names come from a separate etcd CA (DIR/etcd-ca.crt, DIR/etcd-ca.key), so that only the apiservers can
# reach etcd: `etcd` (the members' server and peer certificate; their hosts in ETCD_HOSTS) and
# `apiserver-etcd-client` (the apiservers' client certificate towards etcd). etcd trusts only the etcd CA, so no
# certificate of the fleet CA (a node's, a user's, even the apiserver's serving certificate) is accepted by etcd.
#
# Default names: apiserver admin controller:manager.
# Output per NAME (':' becomes '-' in file names): DIR/NAME.crt, DIR/NAME.key (0600).
# Existing files are kept, so the script can add identities to existing CAs.
set -euo pipefail
dir=${1:?usage: deploy/certs.sh DIR [NAME ...]}
shift || true
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(apiserver admin controller:manager)
days=${CERT_DAYS:-825}
mkdir -p "$dir"
umask 077

make_ca() { # make_ca FILE-PREFIX COMMON-NAME: a CA unless it exists
  if [ ! -f "$dir/$1.key" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -subj "/CN=$2" -keyout "$dir/$1.key" -out "$dir/$1.crt" 2>/dev/null
  fi
}

for name in "${names[@]}"; do
  file=${name//:/-}
  [ -f "$dir/$file.crt" ] && continue
  ca=ca
  case "$name" in
    etcd | apiserver-etcd-client) ca=etcd-ca; make_ca etcd-ca caravanserai-etcd-ca ;;
    *) make_ca ca caravanserai-ca ;;
  esac
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
  openssl x509 -req -in "$dir/$file.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" -CAcreateserial \
    -days "$days" -extfile "$ext" -out "$dir/$file.crt" 2>/dev/null
  rm -f "$dir/$file.csr" "$ext"
  echo "$dir/$file.crt ($name, from $ca.crt)"
done
