#!/bin/bash
# extract_clips.sh SHARD FIRST COUNT CLIP_BYTES -- raw PCM of COUNT consecutive clips of a recorder shard
# (the recorder vendor's offload format: one gzip stream of back-to-back fixed-length clips)
set -eu
shard=$1 first=$2 count=$3 clip_bytes=$4
gzip -dc -- "$shard" | tail -c +$((first * clip_bytes + 1)) | head -c $((count * clip_bytes))
