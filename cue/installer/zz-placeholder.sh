#!/bin/sh
set -eu
echo placeholder
