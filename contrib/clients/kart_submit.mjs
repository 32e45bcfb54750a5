#!/usr/bin/env node
// A Kartikeya client for Node.js, with its standard library only: submit a
// task, read its state, wait for its result. Written from
// spool-layout/README.md; the same shape as kart_submit.py.
//
// submit (section 3): Node has no renameat2, so the task is published the
// maildir way the document allows without RENAME_NOREPLACE:
//   1. pick the id as kart submit does: the first of NAME, NAME.2, ...
//      absent from new/, every cur/*/ and done/ (.task, .json), looked at
//      in that order; if it is not NAME, add `#kart: name=NAME` (the value
//      %XX-escaped, section 3.1) after the #! line;
//   2. write the task in tmp/ (O_EXCL), fsync it, close it;
//   3. link(tmp/T, new/ID), which never replaces: on EEXIST (or an id now
//      taken) try the next id; then unlink(tmp/T). Between the two the
//      file has two links, and a worker holds it as busy (section 9);
//   4. fsync new/.
// wait (section 8): a watch on done/ (inotify, through fs.watch), and a
// look for done/ID.json after every event, with a slow poll beside it.
//
//   node kart_submit.mjs SPOOL FILE|- [NAME]      submit; prints the id
//   node kart_submit.mjs wait SPOOL ID [SECONDS]  prints the result (JSON)
//   node kart_submit.mjs status SPOOL ID          queued, running, a status, unknown
//   node kart_submit.mjs result SPOOL ID          prints the result, or exits 1
//
// As a module:
//   import { Spool } from './kart_submit.mjs';
//   const s = new Spool(path);
//   const id = s.submit(data, name);   // data: string (UTF-8) or Buffer
//   s.status(id); s.result(id);        // result: an object, or null
//   await s.wait(id, timeoutSeconds);  // the result; rejects on a timeout
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const NAME_MAX = 200; // bytes; keep names to 190 so that NAME.N fits
const C = fs.constants;

// A directive value, escaped (section 3.1): %XX for '%', space, tab, '#',
// bytes below 0x20 and 0x7f; every other byte as is.
export function pctEncode(value) {
  const raw = Buffer.isBuffer(value) ? value : Buffer.from(String(value), 'utf8');
  const out = [];
  for (const b of raw) {
    if (b === 0x25 || b === 0x20 || b === 0x09 || b === 0x23 || b < 0x20 || b === 0x7f)
      out.push(...Buffer.from('%' + b.toString(16).toUpperCase().padStart(2, '0')));
    else out.push(b);
  }
  return Buffer.from(out);
}

// The task name rules (section 2): null if fine, else why.
export function nameCheck(name) {
  const raw = Buffer.from(name, 'utf8');
  if (raw.length === 0) return 'empty name';
  if (raw[0] === 0x2e) return "starts with '.'";
  if (raw.length > NAME_MAX) return 'name longer than 200 bytes';
  if (name.includes('\uFFFD') && !raw.equals(Buffer.from(raw.toString('utf8'), 'utf8')))
    return 'name is not valid UTF-8';
  for (const b of raw) if (b < 0x20 || b === 0x7f) return 'name contains a control character';
  if (name.includes('/')) return "name contains '/'";
  return null;
}

function withName(data, name) {
  const line = Buffer.concat([Buffer.from('#kart: name='), pctEncode(name), Buffer.from('\n')]);
  if (data.length >= 2 && data[0] === 0x23 && data[1] === 0x21) {
    const nl = data.indexOf(0x0a);
    if (nl < 0) return Buffer.concat([data, Buffer.from('\n'), line]);
    return Buffer.concat([data.subarray(0, nl + 1), line, data.subarray(nl + 1)]);
  }
  return Buffer.concat([line, data]);
}

function lexists(p) {
  try {
    fs.lstatSync(p);
    return true;
  } catch (e) {
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return false;
    throw e;
  }
}

function fsyncPath(p) {
  const fd = fs.openSync(p, C.O_RDONLY | C.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export class Spool {
  constructor(p) {
    this.path = p;
  }

  p(...parts) {
    return path.join(this.path, ...parts);
  }

  runningOn(id) {
    let workers;
    try {
      workers = fs.readdirSync(this.p('cur'));
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
    for (const w of workers) if (!w.startsWith('.') && lexists(this.p('cur', w, id))) return w;
    return null;
  }

  // As kart submit checks: new/, then every cur/*/, then done/.
  idTaken(id) {
    return lexists(this.p('new', id)) || this.runningOn(id) !== null ||
      lexists(this.p('done', id + '.task')) || lexists(this.p('done', id + '.json'));
  }

  *ids(name) {
    yield name;
    for (let n = 2; n < 1000000; n++) yield `${name}.${n}`;
  }

  // Queue data (string or Buffer) as a task; return its id.
  submit(data, name = 'task') {
    if (typeof data === 'string') data = Buffer.from(data, 'utf8');
    else if (data instanceof Uint8Array) data = Buffer.from(data);
    else throw new TypeError('data must be a string or a Buffer');
    const why = nameCheck(name);
    if (why) throw new RangeError(`not a task name: ${JSON.stringify(name)} (${why})`);
    let id = null;
    for (const c of this.ids(name)) if (!this.idTaken(c)) { id = c; break; }
    if (Buffer.byteLength(id) > NAME_MAX) throw new RangeError(`no id for ${name} fits in 200 bytes`);
    if (id !== name) data = withName(data, name);
    let tmp, fd;
    for (;;) {
      tmp = this.p('tmp', `${Date.now()}.${process.pid}.${crypto.randomBytes(8).toString('hex')}`);
      try {
        fd = fs.openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o640);
        break;
      } catch (e) {
        if (e.code !== 'EEXIST') throw e;
      }
    }
    try {
      try {
        for (let off = 0; off < data.length;) off += fs.writeSync(fd, data, off);
        fs.fsyncSync(fd); // a failed fsync is a failed submit: never retried
      } finally {
        fs.closeSync(fd);
      }
      for (const c of this.ids(name)) {
        if (c !== id && this.idTaken(c)) continue;
        if (Buffer.byteLength(c) > NAME_MAX) throw new Error(`no free id for ${name}`);
        try {
          fs.linkSync(tmp, this.p('new', c));
        } catch (e) {
          if (e.code === 'EEXIST') continue;
          throw e;
        }
        fs.unlinkSync(tmp);
        tmp = null;
        fsyncPath(this.p('new'));
        return c;
      }
      throw new Error(`no free id for ${name}`);
    } finally {
      if (tmp) try { fs.unlinkSync(tmp); } catch { /* gone already */ }
    }
  }

  // done/ID.json as an object, or null while the task is not finished.
  result(id) {
    try {
      return JSON.parse(fs.readFileSync(this.p('done', id + '.json'), 'utf8'));
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
  }

  // queued, running, the result's status, or unknown: the furthest place
  // found, looking in the order tasks move (section 8).
  status(id) {
    const queued = lexists(this.p('new', id));
    const running = this.runningOn(id);
    const r = this.result(id);
    if (r) return r.status ?? '?';
    if (running) return 'running';
    return queued ? 'queued' : 'unknown';
  }

  // The result of id once it exists; rejects after timeout seconds
  // (undefined: no limit).
  wait(id, timeout) {
    return new Promise((resolve, reject) => {
      let watcher = null, poll = null, timer = null, done = false;
      const finish = (err, r) => {
        if (done) return;
        done = true;
        if (watcher) watcher.close();
        clearInterval(poll);
        clearTimeout(timer);
        if (err) reject(err); else resolve(r);
      };
      const look = () => {
        try {
          const r = this.result(id);
          if (r) finish(null, r);
        } catch (e) {
          if (!(e instanceof SyntaxError)) finish(e);
        }
      };
      try {
        watcher = fs.watch(this.p('done'), { persistent: true }, look);
        watcher.on('error', () => { watcher = null; });
      } catch { watcher = null; }
      poll = setInterval(look, watcher ? 1000 : 200); // an overflow, or no inotify
      if (timeout !== undefined && timeout !== null)
        timer = setTimeout(() => {
          const e = new Error(`no result for ${id} within ${timeout}s`);
          e.code = 'ETIMEDOUT';
          finish(e);
        }, timeout * 1000);
      look();
    });
  }
}

export function submit(spool, data, name) {
  return new Spool(spool).submit(data, name);
}

async function main(argv) {
  const usage = 'usage: kart_submit.mjs SPOOL FILE|- [NAME]\n' +
    '       kart_submit.mjs wait SPOOL ID [SECONDS]\n' +
    '       kart_submit.mjs status SPOOL ID\n' +
    '       kart_submit.mjs result SPOOL ID';
  try {
    if (['wait', 'status', 'result'].includes(argv[0])) {
      if (argv.length !== 3 && !(argv[0] === 'wait' && argv.length === 4)) {
        console.error(usage);
        return 2;
      }
      const s = new Spool(argv[1]);
      if (argv[0] === 'status') {
        console.log(s.status(argv[2]));
        return 0;
      }
      let r;
      if (argv[0] === 'result') {
        r = s.result(argv[2]);
        if (!r) {
          console.error(`kart_submit.mjs: ${argv[2]}: no result`);
          return 1;
        }
      } else {
        r = await s.wait(argv[2], argv.length === 4 ? Number(argv[3]) : undefined);
      }
      console.log(JSON.stringify(r));
      return 0;
    }
    if (argv.length !== 2 && argv.length !== 3) {
      console.error(usage);
      return 2;
    }
    let data, base;
    if (argv[1] === '-') {
      data = fs.readFileSync(0);
      base = 'stdin';
    } else {
      data = fs.readFileSync(argv[1]);
      base = path.basename(argv[1]);
      if (nameCheck(base)) base = 'task'; // as kart submit: a path that is no task name
    }
    console.log(new Spool(argv[0]).submit(data, argv.length === 3 ? argv[2] : base));
    return 0;
  } catch (e) {
    console.error(`kart_submit.mjs: ${e.message}`);
    return 1;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  main(process.argv.slice(2)).then((rc) => { process.exitCode = rc; });
