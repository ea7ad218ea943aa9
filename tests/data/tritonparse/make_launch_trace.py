# Builds softmax_attn_launch.ndjson and malformed.ndjson from the real compile trace beside it
# (softmax_attn_compile.ndjson, made by make_traces.py). Launch events need a GPU, so the launch lines
# here are written by this script in the format tritonparse 0.6.0's LaunchHookImpl logs
# (structured_logging.py: trace_structured_triton("launch", ...) puts name, function, stream, grid,
# compilation_metadata, extracted_args and extracted_inductor_args at the top level of the event, beside
# event_type, pid, stack and timestamp; a tensor argument is {"type": "tensor", "shape", "dtype",
# "device", "stride", "numel", "is_contiguous", "element_size", "storage_offset", "memory_usage",
# "data_ptr"}, a scalar {"type": "int" | "float" | "bool", "value"}; every argument is there, constexprs
# included, because Triton's CompiledKernel.launch_metadata zips fn.arg_names with all bound arguments).
#
#     python3 make_launch_trace.py
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
KEEP = (".ttir", ".ttgir", ".json")  # the launch trace keeps these IRs; LLVM IR and PTX are dropped


def tensor(shape, dtype="torch.float16", ptr=0x7F0000000000, stride=None):
    contiguous, acc = [], 1
    for d in reversed(shape):
        contiguous.insert(0, acc)
        acc *= d
    stride = stride or contiguous
    acc = 1 + sum((d - 1) * s for d, s in zip(shape, stride))
    size = {"torch.float16": 2, "torch.float32": 4}[dtype]
    return {"type": "tensor", "shape": shape, "dtype": dtype, "device": "cuda:0", "stride": stride,
            "numel": acc, "is_contiguous": True, "element_size": size, "storage_offset": 0,
            "memory_usage": acc * size, "data_ptr": hex(ptr)}


def scalar(v):
    return {"type": type(v).__name__, "value": v}


def launch(comp, grid, args, ts):
    md = json.loads(next(v for k, v in comp["payload"]["file_content"].items() if k.endswith(".json")))
    return {"event_type": "launch", "pid": comp["pid"], "name": md["name"], "function": 94006507436288,
            "stream": 0, "grid": grid, "compilation_metadata": md, "extracted_args": args,
            "extracted_inductor_args": {}, "stack": comp["stack"][:2], "timestamp": ts}


def softmax_args(rows, cols, block):
    # Rows padded to a multiple of 16 elements: the row strides are divisible by 16, as the compile says.
    pad = (cols + 15) // 16 * 16
    return {"out_ptr": tensor([rows, cols], stride=[pad, 1]),
            "in_ptr": tensor([rows, cols], ptr=0x7F0001000000, stride=[pad, 1]),
            "in_row_stride": scalar(pad), "out_row_stride": scalar(pad), "n_cols": scalar(cols),
            "BLOCK_SIZE": scalar(block)}


def attn_args(heads, seq, dim):
    a = {n: tensor([heads, seq, dim], ptr=0x7F0000000000 + i * 0x1000000) for i, n in
         enumerate(["q_ptr", "k_ptr", "v_ptr", "o_ptr"])}
    a["sm_scale"] = scalar(0.125)
    a["seq_len"] = scalar(seq)
    for s in ["q", "k", "v", "o"]:
        a[f"stride_{s}h"] = scalar(seq * dim)
        a[f"stride_{s}{'m' if s in 'qo' else 'n'}"] = scalar(dim)
    a.update({"HEAD_DIM": scalar(dim), "BLOCK_M": scalar(128), "BLOCK_N": scalar(64)})
    order = ["q_ptr", "k_ptr", "v_ptr", "o_ptr", "sm_scale", "seq_len", "stride_qh", "stride_qm", "stride_kh",
             "stride_kn", "stride_vh", "stride_vn", "stride_oh", "stride_om", "HEAD_DIM", "BLOCK_M", "BLOCK_N"]
    return {k: a[k] for k in order}


def main():
    with open(os.path.join(HERE, "softmax_attn_compile.ndjson")) as f:
        comps = [json.loads(line) for line in f]
    for c in comps:
        fc = c["payload"]["file_content"]
        c["payload"]["file_content"] = {k: v for k, v in fc.items() if k.endswith(KEEP)}
    soft, _, attn = comps
    t = "2026-12-06T20:31:%02d.000000Z"
    events = [
        comps[0], comps[1], comps[2],
        launch(soft, [4096, 1, 1], softmax_args(4096, 1000, 1024), t % 1),
        launch(soft, [4096, 1, 1], softmax_args(4096, 1000, 1024), t % 2),  # same shapes: one case
        launch(attn, [8, 16, 1], attn_args(16, 1000, 64), t % 3),
        launch(soft, [8192, 1, 1], softmax_args(8192, 1000, 1024), t % 4),
        launch(attn, [16, 16, 1], attn_args(16, 2000, 64), t % 5),
        launch(attn, [8, 16, 1], attn_args(16, 1000, 64), t % 6),
    ]
    with open(os.path.join(HERE, "softmax_attn_launch.ndjson"), "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    good = json.dumps(soft)
    lines = [
        good,
        json.dumps(events[3])[:300],  # line 2: cut short, as a trace whose writer was killed
        "this is not json",           # line 3
        "[1, 2, 3]",                  # line 4: JSON, but not an event
        "",                           # line 5: blank, ignored
        json.dumps(events[6]),        # line 6: a launch of the compilation on line 1
    ]
    with open(os.path.join(HERE, "malformed.ndjson"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(HERE, "no_compilation.ndjson"), "w") as f:
        f.write(json.dumps(events[3]) + "\n" + json.dumps(events[5]) + "\n")
    open(os.path.join(HERE, "empty.ndjson"), "w").close()


if __name__ == "__main__":
    main()
