# Building and publishing the image. Needs Docker; the multi-arch target needs buildx
# (Docker Desktop, or `docker buildx create --use` once on Linux).
#   make image                                   this machine's architecture, loaded locally
#   make image-push REGISTRY=ghcr.io/you         amd64 and arm64, pushed
IMAGE ?= runpod-reconciler
REGISTRY ?=
TAG ?= $(shell python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
PLATFORMS ?= linux/amd64,linux/arm64
REF = $(if $(REGISTRY),$(REGISTRY)/)$(IMAGE):$(TAG)

.PHONY: image image-push

image:
	docker build --tag $(REF) .

image-push:
	docker buildx build --platform $(PLATFORMS) --tag $(REF) --push .
