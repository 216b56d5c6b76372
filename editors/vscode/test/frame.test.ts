// The framing (PROTOCOL.md, section 2): frames cut at any byte come out whole; binary frames; the
// header sections tthd refuses are refused here too.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeBinary, encodeJson, Frame, FrameError, FrameParser } from '../src/frame';

test('frames split at every byte come out whole and in order', () => {
  const msgs = [{ jsonrpc: '2.0', id: 1, method: 'status', params: {} }, { jsonrpc: '2.0', method: 'x', params: { s: 'é€𝄞' } }];
  const bin = Buffer.from([0, 1, 2, 255, 13, 10, 13, 10]);
  const stream = Buffer.concat([encodeJson(msgs[0]), encodeBinary(bin), encodeJson(msgs[1])]);
  for (let cut = 0; cut <= stream.length; cut++) {
    const p = new FrameParser();
    const out: Frame[] = [...p.push(stream.subarray(0, cut)), ...p.push(stream.subarray(cut))];
    assert.equal(out.length, 3, `cut at ${cut}`);
    assert.deepEqual(out[0], { kind: 'json', message: msgs[0] });
    assert.deepEqual(out[1], { kind: 'binary', data: bin });
    assert.deepEqual(out[2], { kind: 'json', message: msgs[1] });
  }
});

test('byte by byte, bare newlines, other header fields and case are accepted', () => {
  const body = '{"jsonrpc":"2.0","id":"a","result":null}';
  const text = `content-LENGTH:  ${Buffer.byteLength(body)} \nX-Other: 1\nContent-Type: application/json; charset=utf-8\n\n${body}`;
  const p = new FrameParser();
  const out: Frame[] = [];
  for (const b of Buffer.from(text)) out.push(...p.push(Buffer.from([b])));
  assert.deepEqual(out, [{ kind: 'json', message: { jsonrpc: '2.0', id: 'a', result: null } }]);
});

test('malformed header sections are refused', () => {
  const bad = [
    'Content-Type: application/json\r\n\r\n{}',           // no length
    'Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}',    // twice
    'Content-Length: -2\r\n\r\n{}',
    'Content-Length: 2\r\nContent-Type: text/plain\r\n\r\n{}',
    'Content-Length 2\r\n\r\n{}',                          // no colon
    'Content-Length: 3\r\n\r\n{x}',                        // body not JSON
    `X: ${'a'.repeat(5000)}`,                              // header longer than 4096 bytes
  ];
  for (const b of bad) assert.throws(() => new FrameParser().push(Buffer.from(b)), FrameError, b.slice(0, 40));
});

test('the encoder writes CRLF headers with the exact byte length', () => {
  const f = encodeJson({ s: 'ü' }).toString('utf8');
  assert.match(f, /^Content-Length: 10\r\nContent-Type: application\/vscode-jsonrpc; charset=utf-8\r\n\r\n\{"s":"ü"\}$/);
  assert.equal(encodeBinary(Buffer.alloc(3)).toString("latin1").split('\r\n')[1], 'Content-Type: application/octet-stream');
});
