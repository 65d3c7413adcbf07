"""The stand-in's gRPC service: the subset of Modal's API (``modal_proto``, the service ``modal.client.ModalClient``)
that ``calibration.run`` and ``sweep --executor modal`` use, written from the protos and the modal 1.6.4 client.

Every method of the service is mapped: the ones below answer; any other answers UNIMPLEMENTED with its name (and
is logged), so that a client path this stand-in does not cover fails loudly instead of hanging. Requests are
authenticated as Modal's are, by the token id and secret in the metadata (``x-modal-token-id``/``-secret``):
any other token than the stand-in's is UNAUTHENTICATED, as a bad token is on Modal.

What it keeps: apps (by id and deployed name), images (built at once: the packages are this interpreter's), mounts
and their files (by sha256; a container's ``root`` is made of them), Functions and classes (each a
calibration/standin/platform.py ``Function``), function calls and their outputs, and sandboxes
(calibration/standin/sandboxes.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import shlex
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpclib.const
from google.protobuf import empty_pb2
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from modal_proto import api_grpc, api_pb2

from calibration.standin.platform import ASYNC, SYNC, Call, Function, Input, Platform, Rejected
from calibration.standin.sandboxes import answer

IMAGE_BUILDER_VERSION = "2025.06"  # one the modal 1.6.4 client supports (modal/_image.py)
TOKEN_ID, TOKEN_SECRET = "ak-standin", "as-standin"  # the stand-in's test token (MODAL_TOKEN_ID/_SECRET)


@dataclass
class App:
    id: str
    name: str
    state: int
    functions: dict[str, str] = field(default_factory=dict)  # tag -> function id
    classes: dict[str, str] = field(default_factory=dict)  # tag -> class id


@dataclass
class FunctionDef:
    id: str
    app_id: str
    tag: str
    proto: api_pb2.Function | None = None
    metadata: api_pb2.FunctionHandleMetadata | None = None
    live: Function | None = None
    data: api_pb2.FunctionData | None = None


class Service:
    """The servicer (grpclib's ``__mapping__``): each ``rpc_<Method>(request, stream)`` answers ``<Method>``."""

    def __init__(self, platform: Platform, workdir: Path, url: Callable[[], str]) -> None:
        self.platform, self.workdir, self.url = platform, workdir, url
        self.ids = itertools.count(1)
        self.apps: dict[str, App] = {}
        self.deployed: dict[str, str] = {}  # name -> app id
        self.functions: dict[str, FunctionDef] = {}
        self.classes: set[str] = set()
        self.mounts: dict[str, list[api_pb2.MountFile]] = {}
        self.files: dict[str, bytes] = {}  # sha256 -> content
        self.images: dict[str, api_pb2.Image] = {}  # image id -> its definition (ENV directives, base images)
        self.blobs: dict[str, bytes] = {}
        self.calls: dict[str, Call] = {}
        self.unimplemented: list[str] = []
        from calibration.standin.sandboxes import Sandboxes

        self.sandboxes = Sandboxes(self)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-standin{next(self.ids):06d}"

    # --- grpclib plumbing --------------------------------------------------------------------------------------------
    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        class Names:
            def __getattr__(self, name: str) -> str:
                return name

        out = {}
        for path, h in api_grpc.ModalClientBase.__mapping__(Names()).items():  # type: ignore[arg-type]
            out[path] = grpclib.const.Handler(self._handler(h.func, h.cardinality), *h[1:])
        return out

    def _handler(self, name: str, cardinality: grpclib.const.Cardinality) -> Callable:
        impl = getattr(self, f"rpc_{name}", None)

        async def handle(stream: Any) -> None:
            self._authenticate(stream.metadata)
            request = await stream.recv_message()
            if impl is None:
                self.unimplemented.append(name)
                self.platform.log(f"unimplemented: {name}")
                raise GRPCError(Status.UNIMPLEMENTED, f"the Modal stand-in does not implement {name}")
            await answer(stream, impl, request, cardinality)

        return handle

    def _authenticate(self, metadata: Any) -> None:
        if metadata.get("x-modal-token-id") != TOKEN_ID or metadata.get("x-modal-token-secret") != TOKEN_SECRET:
            raise GRPCError(Status.UNAUTHENTICATED, "Token ID is malformed or invalid (the Modal stand-in)")

    # --- client, apps ----------------------------------------------------------------------------------------------
    async def rpc_ClientHello(self, req: empty_pb2.Empty) -> api_pb2.ClientHelloResponse:
        return api_pb2.ClientHelloResponse()

    async def rpc_EnvironmentGetOrCreate(self, req: Any) -> api_pb2.EnvironmentGetOrCreateResponse:
        return api_pb2.EnvironmentGetOrCreateResponse(
            environment_id="en-standin",
            metadata=api_pb2.EnvironmentMetadata(
                name="main", settings=api_pb2.EnvironmentSettings(image_builder_version=IMAGE_BUILDER_VERSION)
            ),
        )

    async def rpc_AppGetByDeploymentName(self, req: Any) -> api_pb2.AppGetByDeploymentNameResponse:
        return api_pb2.AppGetByDeploymentNameResponse(app_id=self.deployed.get(req.name, ""))

    def _new_app(self, name: str, state: int) -> App:
        app = App(self.new_id("ap"), name, state)
        self.apps[app.id] = app
        return app

    async def rpc_AppCreate(self, req: api_pb2.AppCreateRequest) -> api_pb2.AppCreateResponse:
        app = self._new_app(req.description, req.app_state)
        return api_pb2.AppCreateResponse(app_id=app.id, app_page_url=f"{self.url()}/apps/{app.id}")

    async def rpc_AppGetOrCreate(self, req: api_pb2.AppGetOrCreateRequest) -> api_pb2.AppGetOrCreateResponse:
        if req.app_name in self.deployed:
            return api_pb2.AppGetOrCreateResponse(app_id=self.deployed[req.app_name])
        if req.object_creation_type != api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
            raise GRPCError(Status.NOT_FOUND, f"App '{req.app_name}' not found")
        app = self._new_app(req.app_name, api_pb2.APP_STATE_DEPLOYED)
        self.deployed[app.name] = app.id
        return api_pb2.AppGetOrCreateResponse(app_id=app.id)

    async def rpc_AppGetLayout(self, req: Any) -> api_pb2.AppGetLayoutResponse:
        app = self._app(req.app_id)
        layout = api_pb2.AppLayout(function_ids=app.functions, class_ids=app.classes)
        return api_pb2.AppGetLayoutResponse(app_layout=layout)

    async def rpc_AppHeartbeat(self, req: Any) -> empty_pb2.Empty:
        return empty_pb2.Empty()

    async def rpc_AppPublish(self, req: api_pb2.AppPublishRequest) -> api_pb2.AppPublishResponse:
        app = self._app(req.app_id)
        app.functions, app.classes = dict(req.function_ids), dict(req.class_ids)
        app.state = req.app_state
        if req.name:
            old = self.deployed.get(req.name)
            if old and old != app.id:
                await self._stop_app(old)
            app.name = req.name
            self.deployed[req.name] = app.id
        for fid in app.functions.values():
            self._start(self.functions[fid])
        return api_pb2.AppPublishResponse(url=f"{self.url()}/apps/{app.id}", deployed_at=time.time())

    async def rpc_AppStop(self, req: api_pb2.AppStopRequest) -> empty_pb2.Empty:
        if req.app_id not in self.apps:
            raise GRPCError(Status.NOT_FOUND, f"App {req.app_id} not found")
        await self._stop_app(req.app_id)
        return empty_pb2.Empty()

    async def rpc_AppClientDisconnect(self, req: Any) -> empty_pb2.Empty:
        app = self.apps.get(req.app_id)
        if app is not None and app.state != api_pb2.APP_STATE_DEPLOYED:
            await self._stop_app(app.id)
        return empty_pb2.Empty()

    async def rpc_AppList(self, req: Any) -> api_pb2.AppListResponse:
        items = [
            api_pb2.AppListResponse.AppListItem(app_id=a.id, description=a.name, state=a.state)
            for a in self.apps.values()
            if a.state != api_pb2.APP_STATE_STOPPED
        ]
        return api_pb2.AppListResponse(apps=items)

    def _app(self, app_id: str) -> App:
        if app_id not in self.apps:
            raise GRPCError(Status.NOT_FOUND, f"App {app_id} not found")
        return self.apps[app_id]

    async def _stop_app(self, app_id: str) -> None:
        app = self.apps[app_id]
        app.state = api_pb2.APP_STATE_STOPPED
        if self.deployed.get(app.name) == app_id:
            del self.deployed[app.name]
        for fd in self.functions.values():
            if fd.app_id == app_id and fd.live is not None:
                await fd.live.stop()
                self.platform.functions.pop(fd.id, None)
                fd.live = None
        await self.sandboxes.stop_app(app_id)

    def live_apps(self) -> list[str]:
        """The names of apps not stopped (a test checks that a run leaves none)."""
        return [a.name for a in self.apps.values() if a.state != api_pb2.APP_STATE_STOPPED]

    # --- images, mounts, blobs -------------------------------------------------------------------------------------
    async def rpc_ImageGetOrCreate(self, req: api_pb2.ImageGetOrCreateRequest) -> api_pb2.ImageGetOrCreateResponse:
        digest = hashlib.sha256(req.image.SerializeToString(deterministic=True)).hexdigest()[:12]
        self.images[f"im-{digest}"] = req.image
        return api_pb2.ImageGetOrCreateResponse(
            image_id=f"im-{digest}",
            result=api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS),
            metadata=self._image_metadata(),
        )

    def image_env(self, image_id: str) -> dict[str, str]:
        """The environment an image's ``ENV`` directives set (``Image.env``: modal/_image.py writes ``ENV K=V``
        dockerfile commands, values shell-quoted), its base images' first, as a container of it sees them."""
        image, env = self.images.get(image_id), {}
        if image is None:
            return env
        for base in image.base_images:
            env |= self.image_env(base.image_id)
        for command in image.dockerfile_commands:
            if command.startswith("ENV "):
                key, _, value = command[4:].partition("=")
                words = shlex.split(value) or [""]
                env[key.strip()] = words[0]
        return env

    def _image_metadata(self) -> api_pb2.ImageMetadata:
        v = sys.version_info
        return api_pb2.ImageMetadata(
            python_version_info=f"{v.major}.{v.minor}.{v.micro}", image_builder_version=IMAGE_BUILDER_VERSION
        )

    async def rpc_ImageJoinStreaming(self, req: Any) -> AsyncIterator[api_pb2.ImageJoinStreamingResponse]:
        yield api_pb2.ImageJoinStreamingResponse(
            result=api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS),
            eof=True,
            metadata=self._image_metadata(),
        )

    async def rpc_MountGetOrCreate(self, req: api_pb2.MountGetOrCreateRequest) -> api_pb2.MountGetOrCreateResponse:
        missing = [f.filename for f in req.files if f.sha256_hex and f.sha256_hex not in self.files]
        if missing:
            raise GRPCError(Status.NOT_FOUND, f"mount files not uploaded: {missing[:3]}")
        digest = hashlib.sha256(b"".join(f.SerializeToString(deterministic=True) for f in req.files)).hexdigest()
        mount_id = f"mo-{digest[:12]}"
        self.mounts[mount_id] = list(req.files)
        md = api_pb2.MountHandleMetadata(content_checksum_sha256_hex=digest)
        return api_pb2.MountGetOrCreateResponse(mount_id=mount_id, handle_metadata=md)

    async def rpc_MountPutFile(self, req: api_pb2.MountPutFileRequest) -> api_pb2.MountPutFileResponse:
        if req.WhichOneof("data_oneof") == "data":
            self.files[req.sha256_hex] = req.data
        elif req.WhichOneof("data_oneof") == "data_blob_id":
            self.files[req.sha256_hex] = self.blobs[req.data_blob_id]
        return api_pb2.MountPutFileResponse(exists=req.sha256_hex in self.files)

    async def rpc_MountBatchedCheckExistence(self, req: Any) -> Any:
        missing = [sha for sha in req.sha256_hex_hashes if sha not in self.files]
        return api_pb2.MountBatchedCheckExistenceResponse(missing_sha256_hex_hashes=missing)

    def materialize(self, fid: str, mount_ids: list[str]) -> Path:
        """The container root of a Function: its mounts' files under their remote paths (``/root/x`` -> ``x``)."""
        root = self.workdir / fid / "root"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for mid in mount_ids:
            for f in self.mounts.get(mid, []):
                rel = f.filename.removeprefix("/root/").lstrip("/")
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.files.get(f.sha256_hex, b""))
        return root

    # --- functions and classes -------------------------------------------------------------------------------------
    async def rpc_FunctionPrecreate(self, req: api_pb2.FunctionPrecreateRequest) -> api_pb2.FunctionPrecreateResponse:
        fid = req.existing_function_id or self.new_id("fu")
        self.functions[fid] = FunctionDef(fid, req.app_id, req.function_name)
        md = api_pb2.FunctionHandleMetadata(function_name=req.function_name, function_type=req.function_type)
        return api_pb2.FunctionPrecreateResponse(function_id=fid, handle_metadata=md)

    async def rpc_FunctionCreate(self, req: api_pb2.FunctionCreateRequest) -> api_pb2.FunctionCreateResponse:
        if req.HasField("function"):
            fn = req.function
        elif req.function_data.ranked_functions:  # several GPU ranks: the stand-in runs the first
            fn = req.function_data.ranked_functions[0].function
        else:
            raise GRPCError(Status.INVALID_ARGUMENT, "FunctionCreate without a function")
        fid = req.existing_function_id or self.new_id("fu")
        fd = self.functions.setdefault(fid, FunctionDef(fid, req.app_id, fn.function_name))
        fd.proto = fn
        md = api_pb2.FunctionHandleMetadata(
            function_name=fn.function_name,
            function_type=fn.function_type,
            is_method=fn.is_method,
            definition_id=f"de-{fid}",
            class_parameter_info=fn.class_parameter_info,
            supported_input_formats=[api_pb2.DATA_FORMAT_PICKLE],
            supported_output_formats=[api_pb2.DATA_FORMAT_PICKLE],
            app_id=req.app_id,
        )
        for name, method in fn.method_definitions.items():
            md.method_handle_metadata[name].CopyFrom(
                api_pb2.FunctionHandleMetadata(
                    function_name=method.function_name,
                    function_type=method.function_type,
                    is_method=True,
                    use_method_name=name,
                    definition_id=f"de-{fid}",
                    supported_input_formats=[api_pb2.DATA_FORMAT_PICKLE],
                    supported_output_formats=[api_pb2.DATA_FORMAT_PICKLE],
                )
            )
        if fn.is_server or fn.HasField("http_config"):
            md._experimental_flash_urls.append(f"{self.url()}/proxy/{fid}")
        fd.metadata = md
        data = api_pb2.FunctionData(ranked_functions=[api_pb2.FunctionData.RankedFunction(rank=0, function=fn)])
        fd.data = data
        return api_pb2.FunctionCreateResponse(function_id=fid, function=fn, function_data=data, handle_metadata=md)

    def _start(self, fd: FunctionDef) -> None:
        """The Function's input plane and autoscaler (once its app is published or run)."""
        if fd.live is not None or fd.proto is None:
            return
        fn = fd.proto
        root = self.materialize(fd.id, list(fn.mount_ids))
        spec: dict[str, Any] = {"root": str(root), "module": fn.module_name, "name": fn.function_name}
        spec["env"] = self.image_env(fn.image_id)
        if fn.is_class:
            spec["is_class"] = True
            spec["name"] = fn.function_name.removesuffix(".*")
        if fn.definition_type == api_pb2.Function.DEFINITION_TYPE_SERIALIZED:
            path = root.parent / ("class.pkl" if fn.is_class else "function.pkl")
            path.write_bytes(fn.class_serialized if fn.is_class else fn.function_serialized)
            spec["serialized"] = str(path)
        auto = fn.autoscaler_settings
        opts = {
            "max_inputs": fn.max_concurrent_inputs or 1,
            "target_inputs": fn.target_concurrent_inputs,
            "max_containers": auto.max_containers or fn.concurrency_limit,
            "min_containers": auto.min_containers,
            "batch_max_size": fn.batch_max_size,
            "batch_linger_ms": fn.batch_linger_ms,
            "single_use": fn.single_use_containers,
            "server_port": fn.http_config.port if fn.HasField("http_config") else 0,
            "target_concurrency": fn.http_config.target_concurrency if fn.HasField("http_config") else 0,
        }
        fd.live = Function(self.platform, fd.id, fn.function_name, spec, opts)
        self.platform.functions[fd.id] = fd.live

    async def rpc_FunctionGet(self, req: api_pb2.FunctionGetRequest) -> api_pb2.FunctionGetResponse:
        self.platform.log(f"FunctionGet {req.app_name} {req.object_tag}")  # tests count lookups
        fd = self._lookup(req.app_name, req.object_tag, "functions")
        return api_pb2.FunctionGetResponse(function_id=fd.id, handle_metadata=fd.metadata, function=fd.data)

    def _lookup(self, app_name: str, tag: str, kind: str) -> FunctionDef:
        app_id = self.deployed.get(app_name)
        if app_id is None:
            raise GRPCError(
                Status.NOT_FOUND,
                f"Lookup failed for {kind[:-2].title()} '{tag}' from the '{app_name}' app: App not found",
            )
        objects = getattr(self.apps[app_id], kind)
        if tag not in objects:
            raise GRPCError(Status.NOT_FOUND, f"Lookup failed for '{tag}' from the '{app_name}' app: not found")
        return self.functions[objects[tag]]

    async def rpc_ClassCreate(self, req: api_pb2.ClassCreateRequest) -> api_pb2.ClassCreateResponse:
        # a class is its service Function (tag ``Name.*``, looked up with FunctionGet); the class id only names it
        cid = req.existing_class_id or self.new_id("cs")
        self.classes.add(cid)
        return api_pb2.ClassCreateResponse(class_id=cid)

    async def rpc_ClassGet(self, req: api_pb2.ClassGetRequest) -> api_pb2.ClassGetResponse:
        app_id = self.deployed.get(req.app_name)
        if app_id is None or req.object_tag not in self.apps[app_id].classes:
            msg = f"Lookup failed for Cls '{req.object_tag}' from the '{req.app_name}' app"
            raise GRPCError(Status.NOT_FOUND, msg)
        return api_pb2.ClassGetResponse(class_id=self.apps[app_id].classes[req.object_tag])

    async def rpc_FunctionBindParams(
        self, req: api_pb2.FunctionBindParamsRequest
    ) -> api_pb2.FunctionBindParamsResponse:
        fd = self.functions[req.function_id]
        return api_pb2.FunctionBindParamsResponse(bound_function_id=fd.id, handle_metadata=fd.metadata)

    # --- function calls --------------------------------------------------------------------------------------------
    def _live(self, function_id: str) -> Function:
        fd = self.functions.get(function_id)
        if fd is None or fd.live is None:
            raise GRPCError(Status.NOT_FOUND, f"Function {function_id} is not running (its app was stopped)")
        return fd.live

    def _submit(self, fn: Function, call: Call, items: Any, style: str) -> list[api_pb2.FunctionPutInputsResponseItem]:
        out = []
        for item in items:
            inp = Input(self.new_id("in"), call, item.idx, self._args(item.input), item.input.method_name)
            try:
                fn.submit(inp, style)
            except Rejected as e:
                raise GRPCError(Status.RESOURCE_EXHAUSTED, str(e)) from None
            out.append(api_pb2.FunctionPutInputsResponseItem(idx=item.idx, input_id=inp.id, input_jwt=inp.id))
        return out

    def _args(self, inp: api_pb2.FunctionInput) -> bytes:
        if inp.WhichOneof("args_oneof") == "args_blob_id":
            return self.blobs[inp.args_blob_id]
        return inp.args

    async def rpc_FunctionMap(self, req: api_pb2.FunctionMapRequest) -> api_pb2.FunctionMapResponse:
        fn = self._live(req.function_id)
        call = Call(self.new_id("fc"), fn)
        asynchronous = req.function_call_invocation_type in (
            api_pb2.FUNCTION_CALL_INVOCATION_TYPE_ASYNC,
            api_pb2.FUNCTION_CALL_INVOCATION_TYPE_ASYNC_LEGACY,
        )
        call.style = ASYNC if asynchronous else SYNC  # type: ignore[attr-defined]
        items = self._submit(fn, call, req.pipelined_inputs, call.style)  # type: ignore[attr-defined]
        self.calls[call.id] = call
        return api_pb2.FunctionMapResponse(
            function_call_id=call.id,
            pipelined_inputs=items,
            function_call_jwt=call.id,
            max_inputs_outstanding=1000,
        )

    async def rpc_FunctionPutInputs(self, req: api_pb2.FunctionPutInputsRequest) -> api_pb2.FunctionPutInputsResponse:
        call = self._call(req.function_call_id)
        items = self._submit(call.function, call, req.inputs, getattr(call, "style", SYNC))
        return api_pb2.FunctionPutInputsResponse(inputs=items)

    async def rpc_FunctionRetryInputs(
        self, req: api_pb2.FunctionRetryInputsRequest
    ) -> api_pb2.FunctionRetryInputsResponse:
        call = self._call(req.function_call_jwt)
        ids = []
        for item in req.inputs:
            inp = Input(item.input_jwt, call, 0, self._args(item.input), item.input.method_name)
            try:
                call.function.submit(inp, getattr(call, "style", SYNC))
            except Rejected as e:
                raise GRPCError(Status.RESOURCE_EXHAUSTED, str(e)) from None
            ids.append(item.input_jwt)
        return api_pb2.FunctionRetryInputsResponse(input_jwts=ids)

    async def rpc_FunctionFinishInputs(self, req: Any) -> empty_pb2.Empty:
        return empty_pb2.Empty()

    def _call(self, call_id: str) -> Call:
        if call_id not in self.calls:
            raise GRPCError(Status.NOT_FOUND, f"Function call {call_id} not found")
        return self.calls[call_id]

    async def rpc_FunctionGetOutputs(
        self, req: api_pb2.FunctionGetOutputsRequest
    ) -> api_pb2.FunctionGetOutputsResponse:
        call = self._call(req.function_call_id)
        deadline = time.monotonic() + max(0.0, req.timeout)
        single = req.start_idx == req.end_idx and req.clear_on_success and req.max_values == 0
        while True:
            ready = sorted(call.outputs) if not single else [i for i in call.outputs if i == req.start_idx]
            if req.max_values:
                ready = ready[: req.max_values]
            if ready or time.monotonic() >= deadline:
                break
            call.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(call.changed.wait(), deadline - time.monotonic())
        items = [self._output(i, call.outputs[i]) for i in ready]
        if req.clear_on_success:
            for i in ready:
                del call.outputs[i]
        return api_pb2.FunctionGetOutputsResponse(
            outputs=items, idxs=ready, num_unfinished_inputs=call.unfinished, last_entry_id="0-0"
        )

    def _output(self, idx: int, out: dict[str, Any]) -> api_pb2.FunctionGetOutputsItem:
        S = api_pb2.GenericResult
        if out["ok"]:
            result = S(status=S.GENERIC_STATUS_SUCCESS, data=out["data"])
        elif out.get("internal"):
            result = S(status=S.GENERIC_STATUS_INTERNAL_FAILURE, exception=out["error"])
        else:
            result = S(status=S.GENERIC_STATUS_FAILURE, exception=out["error"], traceback=out.get("traceback", ""))
            if out.get("data"):
                result.data = out["data"]
        return api_pb2.FunctionGetOutputsItem(
            result=result,
            idx=idx,
            input_id=out.get("input_id", ""),
            data_format=api_pb2.DATA_FORMAT_PICKLE,
            task_id=out.get("task_id", ""),
            input_started_at=out.get("started", 0.0),
            output_created_at=out.get("ended", 0.0),
        )

    async def rpc_FunctionCallCancel(self, req: Any) -> empty_pb2.Empty:
        return empty_pb2.Empty()

    async def rpc_BlobCreate(self, req: api_pb2.BlobCreateRequest) -> api_pb2.BlobCreateResponse:
        raise GRPCError(Status.UNIMPLEMENTED, "the Modal stand-in keeps payloads inline (no blob storage)")

    # --- sandboxes (calibration/standin/sandboxes.py: V1 and V2 control-plane calls; exec goes to its Router) -----
    async def rpc_AuthTokenGet(self, req: api_pb2.AuthTokenGetRequest) -> api_pb2.AuthTokenGetResponse:
        return self.sandboxes.auth_token()

    async def rpc_SandboxCreate(self, req: api_pb2.SandboxCreateRequest) -> api_pb2.SandboxCreateResponse:
        return await self.sandboxes.create_v1(req)

    async def rpc_SandboxCreateV2(self, req: api_pb2.SandboxCreateV2Request) -> api_pb2.SandboxCreateV2Response:
        return await self.sandboxes.create_v2(req)

    async def rpc_SandboxGetTaskId(self, req: api_pb2.SandboxGetTaskIdRequest) -> api_pb2.SandboxGetTaskIdResponse:
        return await self.sandboxes.get_task_id(req)

    async def rpc_SandboxGetTaskIdV2(self, req: api_pb2.SandboxGetTaskIdRequest) -> api_pb2.SandboxGetTaskIdResponse:
        return await self.sandboxes.get_task_id(req)

    async def rpc_SandboxWait(self, req: api_pb2.SandboxWaitRequest) -> api_pb2.SandboxWaitResponse:
        return await self.sandboxes.wait_rpc(req)

    async def rpc_SandboxWaitV2(self, req: api_pb2.SandboxWaitRequest) -> api_pb2.SandboxWaitResponse:
        return await self.sandboxes.wait_rpc(req)

    async def rpc_SandboxTerminate(self, req: api_pb2.SandboxTerminateRequest) -> api_pb2.SandboxTerminateResponse:
        return await self.sandboxes.terminate_rpc(req)

    async def rpc_SandboxTerminateV2(self, req: api_pb2.SandboxTerminateRequest) -> api_pb2.SandboxTerminateResponse:
        return await self.sandboxes.terminate_rpc(req)

    async def rpc_TaskGetCommandRouterAccess(self, req: api_pb2.TaskGetCommandRouterAccessRequest) -> Any:
        return await self.sandboxes.task_access(req)

    async def rpc_SandboxGetCommandRouterAccess(self, req: api_pb2.SandboxGetCommandRouterAccessRequest) -> Any:
        return await self.sandboxes.sandbox_access(req)
