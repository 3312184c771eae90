// Runs one ONNX model once on ONNX Runtime's CPU execution provider (onnxruntime-node), for
// tests/conformance/compare_ort.py: reads the inputs from a JSON file and writes the outputs to
// another, each tensor as {"type", "dims", "b64"} (its little-endian bytes) or, for strings,
// {"type": "string", "dims", "strings"}.
//
//   node ort_run.js MODEL.onnx INPUTS.json OUTPUTS.json
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array,
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array,
};

function toTensor(t) {
  if (t.type === 'string') return new ort.Tensor('string', t.strings, t.dims);
  const Ctor = ARRAYS[t.type];
  if (!Ctor) throw new Error(`input type ${t.type} is not supported here`);
  const bytes = Buffer.from(t.b64, 'base64');
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new ort.Tensor(t.type, new Ctor(copy.buffer, 0, bytes.length / Ctor.BYTES_PER_ELEMENT),
                        t.dims);
}

function fromTensor(t) {
  if (t.type === 'string') return { type: 'string', dims: t.dims, strings: Array.from(t.data) };
  const d = t.data;
  return { type: t.type, dims: t.dims,
           b64: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64') };
}

async function main() {
  const [model, inputsFile, outputsFile] = process.argv.slice(2);
  const inputs = JSON.parse(fs.readFileSync(inputsFile, 'utf8'));
  const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'] });
  const feeds = {};
  for (const [name, t] of Object.entries(inputs)) feeds[name] = toTensor(t);
  const results = await session.run(feeds);
  const out = session.outputNames.map((name) => fromTensor(results[name]));
  fs.writeFileSync(outputsFile, JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
});
