#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu-trace-loss.py - trace the caching allocator through an HF Trainer run whose loss
materialises fp32 logits, to find which allocation holds the logits-sized block that
nvidia-smi shows and gpumem's step replay does not (docs/estimate.md, "The fourth
logits block: the trace that settles it").

Needs a GPU and a Python with the stack of the run it stands for; nothing here runs in the
test suite.  For fms-acceleration's Liger table (scripts/benchmarks/refs/requirements_liger.txt
at 733992a): torch 2.4.1, transformers 4.45.2, accelerate 1.0.1, peft 0.13.2 and, for
--loss foak, fms-acceleration's framework and FOAK plugin installed from that commit (pip
install of git+https://github.com/foundation-model-stack/fms-acceleration.git@733992a with
#subdirectory=plugins/framework, then #subdirectory=plugins/fused-ops-and-kernels).

    python3 scripts/gpu-trace-loss.py --config Meta-Llama-3-8B/config.json \\
        --batch 4 --seq 4096 --lora --loss foak --steps 4 -o /tmp/trace

stands for the Liger table's row 9 (foak-fast-kernels, LoRA, Meta-Llama-3-8B, 1 GPU, 4 per
GPU) with random weights of the model's shapes (the weights' values do not change what is
allocated).  The model is built from its config in bf16 on the host and moved to the GPU by
the Trainer, LoRA (rank 16, alpha 16,
dropout 0.1 on q, k, v, o, fp32 adapters) as PEFT makes it, HF gradient checkpointing
(reentrant, as transformers 4.45 sets it), and trained by transformers' Trainer with the
arguments of fms-acceleration's defaults.yaml and scenarios-liger.yaml (bf16 autocast, or
pure bf16 with --no-amp as the first table's full fine-tuning and LoRA runs,
adamw_torch, warmup 10 steps, weight decay 0.01, adam_epsilon 1e-4) on packed sequences of
exactly --seq random tokens, every label kept.  --loss foak puts FOAK's unsloth
cross-entropy where its rules do (models/llama.py, mistral.py): before transformers 4.46
FastCrossEntropyLoss in place of CrossEntropyLoss in the model's module (rule llama-cross-ent
at 733992a), from 4.46 FastForCausalLMLoss as the model's loss_function (rule
llama-custom-loss at 24bdadb, for the first table's stack: transformers 4.48.1); --loss hf
keeps the model's own loss.  Fused RMSNorm / RoPE are not applied: they hold no logits-sized tensor.

It writes into the output folder:
  snapshot.pickle   torch.cuda.memory._dump_snapshot() at the end: every segment, every
                    allocation and free with its Python stack (read it with
                    `gpumem snapshot info|peak|trace|categories` or PyTorch's memory_viz)
  steps.txt         after each step: memory_allocated, max_memory_allocated,
                    memory_reserved, the device's used memory (cudaMemGetInfo: what
                    nvidia-smi shows, the CUDA context included), and every segment of at
                    least --big MiB with the blocks in it (size, requested size, state, and
                    the innermost frames of the allocation that made each live block)
  segments.txt      every segment_alloc of the run in order: size, the step it came in and
                    the innermost frames of the request that made it
Compare segments.txt with `gpumem estimate ... --replay-segments` for the same job: the
replay takes three logits-sized segments at the first loss (the 16-bit logits, the fp32
upcast, the shifted copy); the runs read one fp32 copy more on nvidia-smi.  The extra
segment and the live blocks steps.txt shows inside the logits segments at the loss of the
second step name the allocation that is missing from the replay.
"""
import argparse
import json
import os
import sys


def frames_text(frames, n=4):
    """The innermost n frames of a stack, one line each."""
    out = []
    for f in (frames or [])[:n]:
        out.append('      %s:%s %s' % (f.get('filename', '?'), f.get('line', '?'), f.get('name', '?')))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--config', required=True, help="the model's config.json (Llama, Mistral)")
    ap.add_argument('--layers', type=int, default=0, help='override num_hidden_layers (0: as the config)')
    ap.add_argument('--batch', type=int, default=4)
    ap.add_argument('--seq', type=int, default=4096)
    ap.add_argument('--steps', type=int, default=4)
    ap.add_argument('--lora', action='store_true', help='LoRA rank 16 on q, k, v, o (else full fine-tuning)')
    ap.add_argument('--loss', choices=('foak', 'hf'), default='foak')
    ap.add_argument('--no-amp', action='store_true',
                    help='pure bf16, no autocast (the first table\'s full fine-tuning and LoRA runs)')
    ap.add_argument('--big', type=int, default=512, help='list segments of at least this many MiB (default 512)')
    ap.add_argument('-o', '--out', required=True, help='output folder (created)')
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

    if not torch.cuda.is_available():
        print('gpu-trace-loss: no CUDA device', file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)

    with open(a.config) as f:
        raw = json.load(f)
    cfg = AutoConfig.for_model(raw.pop('model_type'), **raw)
    if a.layers:
        cfg.num_hidden_layers = a.layers
    cfg.use_cache = False
    cfg._attn_implementation = 'flash_attention_2' if _has_flash_attn() else 'sdpa'
    # built on the host in bf16, as from_pretrained(torch_dtype=bfloat16) leaves it; the Trainer
    # moves it to the GPU parameter by parameter, as in the runs
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    model = AutoModelForCausalLM.from_config(cfg)
    torch.set_default_dtype(torch.float32)
    if a.loss == 'foak':
        foak_loss(model)
    if a.lora:
        from peft import LoraConfig, get_peft_model
        # trl's SFTTrainer does this before get_peft_model under reentrant checkpointing
        model.enable_input_require_grads()
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=16, lora_dropout=0.1,
                                                 target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj'],
                                                 task_type='CAUSAL_LM'))

    class Packed(torch.utils.data.Dataset):
        def __len__(self):
            return a.batch * (a.steps + 1)

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, cfg.vocab_size, (a.seq,), generator=g)
            return {'input_ids': ids, 'labels': ids.clone()}

    steps_log = open(os.path.join(a.out, 'steps.txt'), 'w')
    step_ends = []  # trace entries recorded by the end of each step
    steps_log.write('torch %s transformers %s attention %s loss %s lora %s amp %s batch %d seq %d layers %d vocab %d\n' % (
        torch.__version__, transformers.__version__, cfg._attn_implementation, a.loss, a.lora, not a.no_amp, a.batch,
        a.seq, cfg.num_hidden_layers, cfg.vocab_size))
    big = a.big << 20

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            torch.cuda.synchronize()
            free, total = torch.cuda.mem_get_info()
            w = steps_log.write
            w('step %d: allocated %d max_allocated %d reserved %d max_reserved %d device_used %d\n' % (
                state.global_step, torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(),
                torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved(), total - free))
            snap = torch.cuda.memory._snapshot()
            step_ends.append(len(snap['device_traces'][torch.cuda.current_device()]))
            for s in snap['segments']:
                if s['total_size'] < big:
                    continue
                w('  segment %.2f MiB at %#x, allocated %.2f MiB\n' % (
                    s['total_size'] / 2**20, s['address'], s['allocated_size'] / 2**20))
                for b in s['blocks']:
                    w('    block %.2f MiB (requested %.2f) %s\n' % (
                        b['size'] / 2**20, b.get('requested_size', 0) / 2**20, b['state']))
                    if b['state'] != 'inactive':
                        w('\n'.join(frames_text(b.get('frames'))) + '\n')
            steps_log.flush()

    args = TrainingArguments(
        output_dir=os.path.join(a.out, 'trainer'), per_device_train_batch_size=a.batch,
        gradient_accumulation_steps=1, gradient_checkpointing=True, bf16=not a.no_amp, max_steps=a.steps,
        learning_rate=2e-4 if a.lora else 2e-5, weight_decay=0.01, warmup_steps=10, adam_epsilon=1e-4,
        lr_scheduler_type='linear', optim='adamw_torch', logging_steps=10, save_strategy='no',
        report_to=[], skip_memory_metrics=False, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=Packed(), callbacks=[Watch()])
    torch.cuda.memory._record_memory_history(stacks='python', max_entries=2_000_000)
    out = trainer.train()
    torch.cuda.memory._dump_snapshot(os.path.join(a.out, 'snapshot.pickle'))
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    steps_log.write('train metrics: %s\n' % json.dumps(out.metrics))
    steps_log.close()

    with open(os.path.join(a.out, 'segments.txt'), 'w') as f:
        for i, e in enumerate(snap['device_traces'][torch.cuda.current_device()]):
            if e['action'] != 'segment_alloc':
                continue
            step = 1 + sum(1 for n in step_ends if n <= i)
            f.write('segment_alloc %.2f MiB stream %d step %d\n' % (e['size'] / 2**20, e.get('stream', 0), step))
            f.write('\n'.join(frames_text(e.get('frames'), 8)) + '\n')
    print('gpu-trace-loss: wrote %s/{steps.txt,segments.txt,snapshot.pickle}' % a.out)
    return 0


def foak_loss(model):
    """Put FOAK's unsloth cross-entropy where its rule <model>-cross-ent / <model>-custom-loss
    does (fms-acceleration models/llama.py, mistral.py at 733992a and 24bdadb)."""
    import importlib
    mod = importlib.import_module(type(model).__module__)
    if not hasattr(type(model), 'loss_function'):
        # transformers before 4.46: the model's forward builds CrossEntropyLoss() from its
        # module; the rule swaps that name (it patches torch.nn.CrossEntropyLoss and reloads
        # the module)
        from fms_acceleration_foak.kernels.unsloth.cross_entropy_loss import FastCrossEntropyLoss
        mod.CrossEntropyLoss = FastCrossEntropyLoss
    else:
        # from 4.46 the model calls self.loss_function, LOSS_MAPPING[self.loss_type]: the rule
        # (replace_custom_loss_when_triggered) maps a type of its own to FastForCausalLMLoss
        from fms_acceleration_foak.kernels.unsloth.cross_entropy_loss import FastForCausalLMLoss
        from transformers.loss.loss_utils import LOSS_MAPPING
        kind = '%s-custom-loss' % model.config.model_type
        LOSS_MAPPING[kind] = FastForCausalLMLoss
        model.loss_type = kind


def _has_flash_attn():
    import importlib.util
    return importlib.util.find_spec('flash_attn') is not None


if __name__ == '__main__':
    sys.exit(main())
