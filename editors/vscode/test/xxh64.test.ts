// XXH64: the published values of short inputs; the daemon's sums of artifacts (libxxhash's)
// are checked against ours in client.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { xxh64 } from '../src/xxh64';

test('XXH64 of the published test inputs', () => {
  assert.equal(xxh64(Buffer.alloc(0)), 'ef46db3751d8e999');
  assert.equal(xxh64(Buffer.from('a')), 'd24ec4f1a98c6e5b');
  assert.equal(xxh64(Buffer.from('abc')), '44bc2cf5ad770999');
});

test('a view into a larger buffer hashes only its bytes', () => {
  const big = Buffer.from('xxabcxx');
  assert.equal(xxh64(big.subarray(2, 5)), '44bc2cf5ad770999');
  const long = Buffer.alloc(100, 7);
  assert.equal(xxh64(Buffer.concat([Buffer.alloc(3), long]).subarray(3)), xxh64(long));
  assert.notEqual(xxh64(long.subarray(0, 99)), xxh64(long));
});
