"""The markdown section of benchmarks/peers.py: ours beside Joey NMT, every figure from the run's figures."""

from __future__ import annotations

from benchmarks.common import num, table
from benchmarks.joey import RNN_STEP, RNN_TOLERANCE

COMMON = ("- Joey appends `</s>` to every source sentence; ours reads the source without it. Joey draws its "
          "embeddings as ours (N(0, 1) for the RNN's, N(0, 1/d_model) for the Transformer's) and its other weights "
          "by its default (Xavier-uniform, zero biases); ours are PyTorch's defaults, but for the Luong families' uniform "
          "[-0.1, 0.1] (Luong et al. §4.1; reports/benchmarks.md, Initialisation). The recipe (rate, warm-up, "
          "batch, dropout) is ours, tuned for our models (`tuned/<family>.yaml`), not for Joey's: its validation loss "
          "is what Joey reaches under our recipe.")
INSTALL = ("- Installing: `joeynmt==2.3.0` declares `torch>=1.12`, so torch 2.13.0 (CPU) goes in first and stays; it "
           "imports `importlib_metadata` without declaring it (installed beside it).")
NAMES = {"bahdanau": "RNN + Bahdanau attention", "luong_concat": "RNN as Luong's global model (concat score)",
         "transformer": "Transformer"}


def side_row(r: dict, who: str, name: str) -> list:
    s = r[who]
    g = s["greedy"]
    return [name, f"{s['params']:,}", num(s["cpu_ms_per_update"], 1), num(s["ms_per_update"], 1),
            num(s["tokens_per_cpu_s"], 0), num(s["tokens_per_s"], 0), num(s["val_loss"], 3), num(s["bleu"], 1),
            num(g["sentences_per_s"], 1), num(g["mean_tokens"], 1)]


def losses(side: dict) -> str:
    """'seed 0: 0.863, seed 1: 0.871'."""
    return ", ".join(f"seed {i}: {x:.3f}" for i, x in enumerate(side["val_losses"]))


def verdict_line(r: dict, tolerance: float) -> str:
    o, j = r["ours"], r["joey"]
    met = "**met**" if r["met"] else "**not met**"
    quality = "equal quality" if r["equal_quality"] else f"more than {100 * tolerance:.0f}% worse"
    return (f"- {NAMES[r['family']]}: CPU time per update ours / Joey's **{r['time_ratio']:.2f}** (wall time "
            f"{r['wall_ratio']:.2f}), validation loss {o['val_loss']:.3f} ({losses(o)}) against {j['val_loss']:.3f} "
            f"({losses(j)}): {quality}, {met}. Greedy sentences/s ours / "
            f"Joey's {o['greedy']['sentences_per_s'] / j['greedy']['sentences_per_s']:.2f}×. "
            + (f"Both trained on {o['train_tokens']:,} target tokens." if o["train_tokens"] == j["train_tokens"] else
               f"Target tokens trained on: ours {o['train_tokens']:,}, Joey's {j['train_tokens']:,}."))


def differences(rows: list[dict]) -> list[str]:
    """What the two sides do differently, with the run's own numbers."""
    lines = []
    for r in rows:
        d = r["dims"]
        if r["joey_model"] == "rnn":
            lines.append(
                f"- RNN: embeddings {d['emb_dim']}, bidirectional GRU encoder {d['enc_hidden_dim']} a direction, "
                f"dropout {d['dropout']:.3g} on both sides. Joey's decoder (GRU, Bahdanau's MLP attention, input feeding, "
                f"a bridge from the encoder) feeds an attentional layer of its own size straight to the vocabulary, "
                f"where ours has a {d['maxout_dim']}-unit maxout; at our decoder size {d['dec_hidden_dim']} Joey's "
                f"model would have {r['joey_params_at_ours']:,} parameters, so its decoder is "
                f"**{r['joey_dec_hidden']}** (the largest multiple of {RNN_STEP} within {100 * RNN_TOLERANCE:.0f}% "
                f"of ours). Its attention hidden "
                f"layer is the decoder's size (ours: {d['attn_dim']}), and it queries with the new state "
                "(Luong's order), ours with the previous one (Bahdanau's).")
        elif r["joey_model"] == "rnn_luong":
            lines.append(
                f"- Luong: the same model on both sides. Embeddings {d['emb_dim']}, a one-way LSTM encoder and decoder "
                f"of {d['hidden_dim']} units and {d['layers']} layer(s), each source read backwards (Joey's files hold "
                "it reversed), input feeding, h̃_t = tanh(W_c [c_t; h_t]) and the score vᵀ tanh(W h_t + U h̄_s) queried "
                f"with the new state, dropout {d['dropout']:.3g}. Joey starts the decoder's cell from the encoder's last "
                "hidden state (ours from its last cell), its attentional layer has a bias and its output layer none "
                "(ours the other way round), and it drops out the attentional layer's input, ours its output. Joey 2.3's "
                "encoder fails on a one-way RNN (it reads a backward state that is not there); "
                "`benchmarks/joey_driver.py` fixes that one line.")
        else:
            lines.append(
                f"- Transformer: d_model {d['d_model']}, {d['heads']} heads, {d['enc_layers']}+{d['dec_layers']} "
                f"layers, d_ff {d['d_ff']}, pre-LN, one scaled embedding for source, target and softmax, sinusoids: "
                "the same parameter count. Joey also drops out attention weights and the feed-forward hidden layer "
                f"(p = {d['dropout']:.3g}; ours only sublayer outputs and embeddings, as Vaswani et al. §5.4), and its "
                "greedy search runs the decoder over the whole prefix at every step (ours caches it).")
    return lines


def recipe(rows: list[dict]) -> str:
    """'bahdanau 0.002, warm-up 200; ...': each pair's rate and warm-up updates."""
    return "; ".join(f"`{r['family']}` {r['lr']:.4g}, warm-up {r['warmup_steps']}" for r in rows)


def render(f: dict) -> list[str]:
    r0 = f["rows"][0]
    sizes = f["sizes"]
    batching = (", so both see the same batches" if all(r["same_batches"] for r in f["rows"]) else
                " (some of ours are short: the same sentences in the same order, batched apart)")
    lines = ["## Side by side with a peer: Joey NMT", "",
             f"Produced by `{f['command']}` (`benchmarks/peers.py`) on {f['date']}; every figure below comes from "
             "that run." + (" **Quick mode: the figures only show that the benchmark runs.**" if f["quick"] else ""),
             "",
             (f"Joey NMT {f['joeynmt']} (its own virtualenv `.venv-peers`, torch {r0['joey']['torch']}) and ours "
              f"(torch {f['torch']}, `lightning.pytorch.Trainer` with the train stage's settings) train each model "
              f"for **{sizes['updates']} updates** from each of {len(r0['seeds'])} seed(s) "
              f"({', '.join(map(str, r0['seeds']))}; the figures are their means) on {r0['ours']['threads']} "
              "thread each, one after the other (ours, Joey's, the next seed), on "
              f"our prepared translate data and BPE vocabulary ({r0['vocab']:,} pieces: Joey reads our pieces as "
              f"words). Joey's training file is our first {sizes['updates']} batches in the order our Trainer draws "
              f"them from that seed, read in order by batches of {r0['batch_size']} sentences{batching}. Adam at each family's "
              f"tuned rate ({recipe(f['rows'])}) with linear warm-up, then constant (the "
              f"rate of our plateau schedule before its first cut; Joey's own schedules cannot do this, see "
              f"`benchmarks/joey_driver.py`), gradient norm clipped at {r0['clip']}, loss per target token."),
             "",
             (f"**ms / update** and **tokens** (target tokens, `</s>` in, padding out, the same count on both "
              f"sides) run from the start of update {sizes['skip']} to the end of the last: forward, backward, "
              "clipping, Adam and each framework's own loop and data loading; **CPU** time is the process's "
              "(`time.process_time`), the work of an update whatever else shares the cores, **wall** time "
              "(`time.perf_counter`) also counts the waits for a core. **Validation loss**: cross-entropy "
              f"per target token over the {r0['ours']['greedy']['sentences']} validation pairs after the last "
              f"update. **Greedy**: sentences/s of each framework's greedy search over the validation sources, "
              f"{r0['decode_batch']} a batch, at most {r0['max_len_ratio']}× the source tokens + 10 steps (our "
              "`evaluate.max_len_ratio` rule), neither emitting `<unk>`; "
              "**BLEU** of those outputs (sacreBLEU, our detokenizer for both) and their mean length (a model that has "
              "not learnt to stop decodes longer, and slower)."), ""]
    rows = []
    for r in f["rows"]:
        rows += [side_row(r, "ours", f"ours `{r['family']}`"), side_row(r, "joey", f"Joey NMT {NAMES[r['family']]}")]
    lines += table(["model", "parameters", "CPU ms / update", "wall ms / update", "tokens / CPU s", "tokens/s",
                    "val loss / token", "greedy BLEU", "greedy sentences/s", "greedy output tokens"], rows)
    target = (f"Target: ours at least as fast per update (CPU time) at equal quality (mean validation loss at "
              f"most {100 * f['quality_tolerance']:.0f}% above Joey's):")
    lines += ["", target, ""]
    lines += [verdict_line(r, f["quality_tolerance"]) for r in f["rows"]]
    lines += ["", "Where the two differ:", "", *differences(f["rows"]), COMMON, INSTALL, ""]
    load = " / ".join(", ".join(f"{x:.2f}" for x in f[k]) for k in ("load_before", "load_after"))
    lines += table(["machine", ""], [["CPU", f"{f['cpu']}, {f['cores']} cores"],
                                     ["torch threads per training process (ours / Joey)",
                                      f"{r0['ours']['threads']} / {r0['joey']['threads']}"],
                                     ["load average before / after (1, 5, 15 min)", load],
                                     ["run time", f"{f['seconds']:.0f} s"]])
    return lines + [""]
