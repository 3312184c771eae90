// Runs one ONNX model on ONNX Runtime's CPU execution provider (onnxruntime-node): warm-up runs,
// then timed runs; prints one JSON line with the median, min and max latency in ms, and writes
// the outputs as .npy files so the caller can compare them with Kiln's.
//
//   node ort_bench.js MODEL.onnx --input NAME=FILE.npy ... --threads N --repeat R --warmup W
//                     [--output-dir DIR]
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const DTYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array],
  '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
      .filter((s) => s.length).map(Number);
  const [type, Ctor] = DTYPES[descr] || [];
  if (!type) throw new Error(`${file}: dtype ${descr} not supported`);
  const data = buf.subarray(start + headerLen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  return new ort.Tensor(type, new Ctor(copy.buffer, 0, data.length / Ctor.BYTES_PER_ELEMENT), shape);
}

function writeNpy(file, tensor) {
  const descr = { float32: '<f4', float64: '<f8', int32: '<i4', int64: '<i8', bool: '|b1' }[tensor.type];
  if (!descr) return;
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const args = process.argv.slice(2);
  const opts = { inputs: {}, threads: 1, repeat: 20, warmup: 3, outputDir: '' };
  let model = '';
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a === '--input') { const [n, f] = args[++i].split('='); opts.inputs[n] = f; }
    else if (a === '--threads') opts.threads = Number(args[++i]);
    else if (a === '--repeat') opts.repeat = Number(args[++i]);
    else if (a === '--warmup') opts.warmup = Number(args[++i]);
    else if (a === '--output-dir') opts.outputDir = args[++i];
    else model = a;
  }
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: opts.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const [name, file] of Object.entries(opts.inputs)) feeds[name] = readNpy(file);
  let out;
  for (let i = 0; i < opts.warmup; ++i) out = await session.run(feeds);
  const ms = [];
  for (let i = 0; i < opts.repeat; ++i) {
    const t = process.hrtime.bigint();
    out = await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const mid = ms.length >> 1;
  const median = ms.length % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
  if (opts.outputDir) {
    fs.mkdirSync(opts.outputDir, { recursive: true });
    for (const [name, t] of Object.entries(out)) writeNpy(path.join(opts.outputDir, `${name}.npy`), t);
  }
  console.log(JSON.stringify({ engine: 'onnxruntime', version: ort.env.versions.common, threads: opts.threads,
    run_ms: { median, min: ms[0], max: ms[ms.length - 1], repeat: opts.repeat, warmup: opts.warmup } }));
}

main().catch((e) => { console.error(`ort_bench.js: ${e.message}`); process.exit(1); });
