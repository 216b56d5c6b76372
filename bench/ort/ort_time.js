#!/usr/bin/env node
// Time one ONNX model with ONNX Runtime (CPU execution provider) and print the figures as JSON.
//
//     node bench/ort/ort_time.js MODEL.onnx [--threads N] [--warmup W] [--runs R] [--seed S]
//          [--input NAME=FILE.npy ...] [--output-dir DIR] [--ort-dir DIR]
//
// The session: intraOpNumThreads N (default 1), interOpNumThreads 1, sequential execution,
// graphOptimizationLevel 'all'. Inputs not given with --input are filled with uniform random
// numbers in [-1, 1) from a fixed seed (float32 only), of the shape the model declares. W warm-up
// runs (default 5), then R timed runs (default 20, at least 20); prints one line:
//
//     {"model": ..., "threads": N, "runs": R, "median_ms": ..., "min_ms": ..., "mean_ms": ...,
//      "inputs": [{"name", "shape"}], "outputs": [{"name", "shape", "file"?}], "ort": version}
//
// --output-dir DIR writes each output of the last run as DIR/<name>.npy (float32, C order), so a
// caller can compare it with another runtime's answer. onnxruntime-node is looked up in
// --ort-dir, else $TTH_ORT_DIR, else build-bench/ort (what bench/ort/setup installs).
'use strict';

const fs = require('fs');
const path = require('path');

function usage(msg) {
    if (msg) process.stderr.write('ort_time.js: ' + msg + '\n');
    process.stderr.write('usage: ort_time.js MODEL.onnx [--threads N] [--warmup W] [--runs R] ' +
                         '[--seed S] [--input NAME=FILE.npy ...] [--output-dir DIR] [--ort-dir DIR]\n');
    process.exit(2);
}

function parseArgs(argv) {
    const opt = { threads: 1, warmup: 5, runs: 20, seed: 1, inputs: {}, outputDir: null,
                  ortDir: process.env.TTH_ORT_DIR ||
                          path.join(__dirname, '..', '..', 'build-bench', 'ort') };
    const positional = [];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            if (i + 1 >= argv.length) usage(a + ' needs a value');
            return argv[++i];
        };
        const count = (min) => {
            const v = value();
            const n = Number(v);
            if (!Number.isInteger(n) || n < min) usage(`${a}: '${v}' is not an integer >= ${min}`);
            return n;
        };
        if (a === '--threads') opt.threads = count(1);
        else if (a === '--warmup') opt.warmup = count(0);
        else if (a === '--runs') opt.runs = count(20);
        else if (a === '--seed') opt.seed = count(0);
        else if (a === '--output-dir') opt.outputDir = value();
        else if (a === '--ort-dir') opt.ortDir = value();
        else if (a === '--input') {
            const v = value();
            const eq = v.indexOf('=');
            if (eq <= 0) usage(`--input wants NAME=FILE, got '${v}'`);
            opt.inputs[v.slice(0, eq)] = v.slice(eq + 1);
        } else if (a === '-h' || a === '--help') usage();
        else if (a.startsWith('-')) usage(`unknown option '${a}'`);
        else positional.push(a);
    }
    if (positional.length !== 1) usage('one model expected');
    opt.model = positional[0];
    return opt;
}

// ---- .npy (version 1 and 2, little-endian float32 / int64, C order) ----------------------------

const NPY_TYPES = { '<f4': 'float32', '<i8': 'int64', '<i4': 'int32', '<f8': 'float64' };

function readNpy(file) {
    const buf = fs.readFileSync(file);
    if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
    const major = buf[6];
    const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
    const start = major === 1 ? 10 : 12;
    const header = buf.toString('latin1', start, start + headerLen);
    const descr = /'descr':\s*'([^']+)'/.exec(header);
    const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
    if (!descr || !shape || /'fortran_order':\s*True/.test(header))
        throw new Error(`${file}: unsupported .npy header ${header.trim()}`);
    const type = NPY_TYPES[descr[1]];
    if (!type) throw new Error(`${file}: unsupported dtype ${descr[1]}`);
    const dims = shape[1].split(',').map(s => s.trim()).filter(s => s.length).map(Number);
    const data = buf.subarray(start + headerLen);
    const ctor = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array,
                   float64: Float64Array }[type];
    // Copy into an aligned buffer of exactly the right length.
    const n = dims.reduce((a, b) => a * b, 1);
    const out = new ctor(n);
    new Uint8Array(out.buffer).set(data.subarray(0, n * ctor.BYTES_PER_ELEMENT));
    return { type, dims, data: out };
}

function writeNpyFloat32(file, dims, data) {
    let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
    // Pad so that the data starts at a multiple of 64 bytes; the header ends with '\n'.
    const total = 10 + header.length + 1;
    header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
    const head = Buffer.alloc(10);
    head.write('\x93NUMPY', 0, 'latin1');
    head[6] = 1; head[7] = 0;
    head.writeUInt16LE(header.length, 8);
    const f32 = data instanceof Float32Array ? data : Float32Array.from(data, Number);
    fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
                                          Buffer.from(f32.buffer, f32.byteOffset, f32.byteLength)]));
}

// ---- a small seeded generator (mulberry32): the same numbers on every run ------------------------

function generator(seed) {
    let s = seed >>> 0;
    return () => {
        s = (s + 0x6D2B79F5) >>> 0;
        let t = s;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

function median(sorted) {
    const n = sorted.length;
    return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

async function main() {
    const opt = parseArgs(process.argv.slice(2));
    let ort;
    try {
        ort = require(path.join(path.resolve(opt.ortDir), 'node_modules', 'onnxruntime-node'));
    } catch (e) {
        process.stderr.write(`ort_time.js: onnxruntime-node not found in ${opt.ortDir} ` +
                             `(run bench/ort/setup): ${e.message}\n`);
        process.exit(1);
    }
    const tReady = process.hrtime.bigint();
    const session = await ort.InferenceSession.create(opt.model, {
        executionProviders: ['cpu'],
        intraOpNumThreads: opt.threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
    });
    const readyMs = Number(process.hrtime.bigint() - tReady) / 1e6;  // session created: ready

    const feeds = {};
    const inputs = [];
    const rand = generator(opt.seed);
    for (const meta of session.inputMetadata) {
        const name = meta.name;
        let tensor;
        if (opt.inputs[name]) {
            const a = readNpy(opt.inputs[name]);
            tensor = new ort.Tensor(a.type, a.data, a.dims);
        } else {
            if (meta.type !== undefined && meta.type !== 'float32')
                throw new Error(`input '${name}' is ${meta.type}: give it with --input`);
            const dims = meta.shape.map(d => (typeof d === 'number' && d > 0 ? d : 1));
            const n = dims.reduce((a, b) => a * b, 1);
            const data = new Float32Array(n);
            for (let i = 0; i < n; i++) data[i] = rand() * 2 - 1;
            tensor = new ort.Tensor('float32', data, dims);
        }
        feeds[name] = tensor;
        inputs.push({ name, shape: tensor.dims });
    }
    for (const name of Object.keys(opt.inputs))
        if (!(name in feeds)) throw new Error(`the model has no input '${name}'`);

    const tFirst = process.hrtime.bigint();
    let result = await session.run(feeds);
    const firstRunMs = Number(process.hrtime.bigint() - tFirst) / 1e6;
    for (let i = 0; i < opt.warmup; i++) result = await session.run(feeds);
    const times = [];
    for (let i = 0; i < opt.runs; i++) {
        const t0 = process.hrtime.bigint();
        result = await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);

    const outputs = [];
    for (const name of session.outputNames) {
        const t = result[name];
        const o = { name, shape: t.dims };
        if (opt.outputDir) {
            fs.mkdirSync(opt.outputDir, { recursive: true });
            o.file = path.join(opt.outputDir, name.replace(/[/\0]/g, '_') + '.npy');
            writeNpyFloat32(o.file, t.dims, t.data);
        }
        outputs.push(o);
    }
    const round = x => Math.round(x * 1000) / 1000;
    console.log(JSON.stringify({
        model: opt.model, threads: opt.threads, warmup: opt.warmup, runs: opt.runs,
        median_ms: round(median(times)), min_ms: round(times[0]),
        mean_ms: round(times.reduce((a, b) => a + b, 0) / times.length),
        ready_ms: round(readyMs), first_run_ms: round(firstRunMs),
        inputs, outputs, ort: ort.env.versions ? ort.env.versions.common : undefined,
    }));
    await session.release();
}

main().catch(e => {
    process.stderr.write('ort_time.js: ' + (e && e.message ? e.message : e) + '\n');
    process.exit(1);
});
