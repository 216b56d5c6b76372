// Finding and keeping the daemon: tthctl's socket path, tthd started through tthctl when
// nothing answers, the connection's states as the daemon goes away and comes back.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { test } from 'node:test';
import { connectOrStart, DaemonConnection, DaemonState, defaultSocketPath } from '../src/daemon';
import { PrivateDaemon, TTHCTL } from './support';

test('the default socket is tthctl\'s', () => {
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/7' }, 7), '/run/user/7/tth/tthd.sock');
  assert.equal(defaultSocketPath({}, 1000), '/tmp/tth-1000/tthd.sock');
});

test('nothing on the socket: tthd is started through tthctl', async () => {
  const d = new PrivateDaemon();
  try {
    const c = await connectOrStart({ socket: d.socket, tthctl: TTHCTL });
    const st = await c.request('status');
    assert.equal(st.socket, d.socket);
    await c.request('shutdown');
    c.close();
    for (let i = 0; i < 100 && fs.existsSync(d.socket); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!fs.existsSync(d.socket), 'the daemon tthctl started has stopped');
    await assert.rejects(connectOrStart({ socket: d.socket, tthctl: '/nonexistent/tthctl' }), /tthctl not found/);
  } finally {
    d.remove();
  }
});

const waitFor = (conn: DaemonConnection, state: DaemonState['state'], ms = 20000) =>
  new Promise<DaemonState>((resolve, reject) => {
    if (conn.state.state === state) return resolve(conn.state);
    const t = setTimeout(() => reject(new Error(`never ${state}; last ${JSON.stringify(conn.state)}`)), ms);
    conn.on('state', (s: DaemonState) => {
      if (s.state === state) {
        clearTimeout(t);
        resolve(s);
      }
    });
  });

test('the connection goes down with the daemon and comes back up when it restarts', async () => {
  const d = await new PrivateDaemon().start();
  const conn = new DaemonConnection({ socket: d.socket, tthctl: '/nonexistent/tthctl' });
  const states: string[] = [];
  const reasons: string[] = [];
  conn.on('state', (s: DaemonState) => {
    states.push(s.state);
    if (s.state === 'down') reasons.push(s.reason);
  });
  try {
    conn.retryNow();
    const up = await waitFor(conn, 'up');
    assert.equal(up.state === 'up' && up.version, '0.1.0');
    assert.equal(await d.stop(), 0);
    await waitFor(conn, 'down');
    assert.match(reasons[0], /closed/, 'down first because tthd closed the connection');
    await d.start();
    await waitFor(conn, 'up');
    const c = await conn.client();
    assert.equal((await c.request('status')).socket, d.socket);
    // connected: asking again, or a retry, keeps the one connection
    conn.retryNow();
    conn.retryNow();
    assert.equal(await conn.client(), c);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await c.request('status')).connections, 1, 'one connection to tthd');
    assert.deepEqual(states.slice(0, 3), ['connecting', 'up', 'down']);
  } finally {
    conn.dispose();
    await d.stop().catch(() => undefined);
    d.remove();
  }
});
