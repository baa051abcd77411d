"""LocalAI's wire facts for proto/localai/backend.proto, checked by localai_backend_test.py.

Every message and field our proto declares, with the number and type LocalAI's
backend/backend.proto gives it (mudler/LocalAI 82c191afadf5f005281e798ccfa0ffd0d5805030,
2026-08-22; docs/design/localai-backend.md), and every RPC with its request and response types.
The check is both ways: a field or RPC we declare that is not listed here fails too, so nothing
reaches the wire unchecked. Fields LocalAI has that we do not declare are skipped by protobuf.
"""
from e2e_checks import check

WIRE_FACTS = {
    "HealthMessage": {},
    "Message": {"role": (1, "string"), "content": (2, "string"), "name": (3, "string"),
                "tool_call_id": (4, "string"), "reasoning_content": (5, "string"),
                "tool_calls": (6, "string")},
    "PredictOptions": {
        "Prompt": (1, "string"), "Seed": (2, "int32"), "Threads": (3, "int32"),
        "Tokens": (4, "int32"), "TopK": (5, "int32"), "Repeat": (6, "int32"),
        "Batch": (7, "int32"), "NKeep": (8, "int32"), "Temperature": (9, "float"),
        "Penalty": (10, "float"), "StopPrompts": (13, "repeated string"),
        "IgnoreEOS": (14, "bool"), "FrequencyPenalty": (17, "float"),
        "PresencePenalty": (18, "float"), "LogitBias": (23, "string"), "Grammar": (29, "string"),
        "TopP": (32, "float"), "UseTokenizerTemplate": (43, "bool"),
        "Messages": (44, "repeated Message"), "Tools": (48, "string"),
        "ToolChoice": (49, "string"), "Logprobs": (50, "int32"), "TopLogprobs": (51, "int32"),
        "MinP": (53, "float")},
    "Reply": {"message": (1, "bytes"), "tokens": (2, "int32"), "prompt_tokens": (3, "int32"),
              "timing_prompt_processing": (4, "double"),
              "timing_token_generation": (5, "double"), "logprobs": (7, "bytes")},
    "ModelOptions": {"Model": (1, "string"), "ContextSize": (2, "int32"), "Seed": (3, "int32"),
                     "NBatch": (4, "int32"), "NGPULayers": (12, "int32"),
                     "Threads": (15, "int32"), "ModelFile": (21, "string"),
                     "ModelPath": (59, "string")},
    "Result": {"message": (1, "string"), "success": (2, "bool")},
    "EmbeddingResult": {"embeddings": (1, "repeated float")},
    "TokenizationResponse": {"length": (1, "int32"), "tokens": (2, "repeated int32")},
    "MemoryUsageData": {"total": (1, "uint64"), "breakdown": (2, "map<string, uint64>")},
    "StatusResponse": {"state": (1, "State"), "memory": (2, "MemoryUsageData")},
    "MetricsRequest": {},
    "MetricsResponse": {"slot_id": (1, "int32"), "prompt_json_for_slot": (2, "string"),
                        "tokens_per_second": (3, "float"), "tokens_generated": (4, "int32"),
                        "prompt_tokens_processed": (5, "int32")},
    "ModelMetadataResponse": {"supports_thinking": (1, "bool"),
                              "rendered_template": (2, "string")},
}
STATES = {"UNINITIALIZED": 0, "BUSY": 1, "READY": 2, "ERROR": -1}
RPCS = {"Health": ("HealthMessage", "Reply"), "Predict": ("PredictOptions", "Reply"),
        "LoadModel": ("ModelOptions", "Result"), "PredictStream": ("PredictOptions", "Reply"),
        "Embedding": ("PredictOptions", "EmbeddingResult"),
        "TokenizeString": ("PredictOptions", "TokenizationResponse"),
        "Status": ("HealthMessage", "StatusResponse"), "Free": ("HealthMessage", "Result"),
        "GetMetrics": ("MetricsRequest", "MetricsResponse"),
        "ModelMetadata": ("ModelOptions", "ModelMetadataResponse")}
STREAMING = {"PredictStream"}
# RPCs LocalAI's service has and tessera-localai does not declare: they must answer UNIMPLEMENTED
# (called with an empty request, as raw bytes).
UNDECLARED_RPCS = ["Detokenize", "GenerateImage", "TTS", "AudioTranscription", "Rerank", "Score",
                   "TokenClassify", "StoresGet", "VAD", "Detect"]

_SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 8: "bool",
            9: "string", 12: "bytes", 13: "uint32"}


def field_type(field):
    """A field's type as WIRE_FACTS spells it."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = (field_type(f) for f in field.message_type.fields)
        return f"map<{key}, {value}>"
    if field.message_type is not None:
        name = field.message_type.name
    elif field.enum_type is not None:
        name = field.enum_type.name
    else:
        name = _SCALARS.get(field.type, f"type {field.type}")
    return f"repeated {name}" if field.label == field.LABEL_REPEATED else name


def check_same_names(what, declared, listed):
    check(declared == listed, f"{what} declared but not in the table: {declared - listed or '-'}; "
                              f"in the table but not declared: {listed - declared or '-'}")


def check_wire_facts(pb2):
    check(pb2.DESCRIPTOR.package == "backend", pb2.DESCRIPTOR.package)
    check_same_names("messages", set(pb2.DESCRIPTOR.message_types_by_name), set(WIRE_FACTS))
    for message, fields in WIRE_FACTS.items():
        descriptor = pb2.DESCRIPTOR.message_types_by_name[message]
        ours = {f.name: (f.number, field_type(f)) for f in descriptor.fields}
        differ = {name: {"ours": ours.get(name), "LocalAI's": fields.get(name)}
                  for name in ours.keys() | fields.keys() if ours.get(name) != fields.get(name)}
        check(not differ, f"{message}: {differ}")
    state = pb2.StatusResponse.DESCRIPTOR.enum_types_by_name["State"]
    check({v.name: v.number for v in state.values} == STATES, state.values)
    service = pb2.DESCRIPTOR.services_by_name["Backend"]
    check(service.full_name == "backend.Backend")
    check_same_names("RPCs", set(service.methods_by_name), set(RPCS))
    for rpc, (request, response) in RPCS.items():
        method = service.methods_by_name[rpc]
        check((method.input_type.name, method.output_type.name) == (request, response), rpc)
        check(method.server_streaming == (rpc in STREAMING) and not method.client_streaming, rpc)
    print("wire facts OK")


def check_undeclared_rpcs(grpc, channel):
    """LocalAI's other RPCs answer UNIMPLEMENTED, and the backend goes on serving."""
    for rpc in UNDECLARED_RPCS:
        call = channel.unary_unary(f"/backend.Backend/{rpc}", request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        try:
            call(b"", timeout=5)
            raise AssertionError(f"{rpc} answered")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.UNIMPLEMENTED, (rpc, error))
    print(f"undeclared RPCs OK ({len(UNDECLARED_RPCS)} answer UNIMPLEMENTED)")
