#!/usr/bin/env node
// A Kartikeya client for Node.js, with its standard library only: submit a
// task, read its state, wait for its result. Written from
// spool-layout/README.md; the same shape as kart_submit.py.
//
// submit (spool-layout README section 5): the id is reserved before the task is published,
// so the id printed is the id of the result. Node has no renameat2, so the
// task is published the maildir way the document allows without
// RENAME_NOREPLACE:
//   1. create the file in tmp/ (O_EXCL); its inode number is INO;
//   2. for ID = NAME, NAME.2, ...: reserve ID with symlink(INO, ids/ID),
//      on EEXIST the next ID; then if ID is in new/ (or new/.held.ID),
//      any cur/*/ or done/ (.task, .json, .attempts), looked at in that
//      order, unlink the reservation and take the next ID;
//   3. write the task into the file, with `#kart: name=NAME` (the value
//      %XX-escaped, section 3) after the #! line when ID is not NAME;
//      fsync it, close it; fsync ids/;
//   4. link(tmp/T, new/ID), which never replaces: on EEXIST unlink the
//      reservation and go back to 2; then unlink(tmp/T). Between the two
//      the file has two links, and a worker holds it as busy (section 9, "What workers do");
//   5. fsync new/. The worker removes the reservation with the result.
// wait (section 7): a watch on done/ (inotify, through fs.watch), and a
// look for done/ID.json after every event, with a slow poll beside it.
//
//   node kart_submit.mjs [-C DIR] [--bind PATH] [--ro PATH] [-e NAME[=VALUE]]
//                        SPOOL FILE|- [NAME]      submit; prints the id
//   node kart_submit.mjs wait SPOOL ID [SECONDS]  prints the result (JSON)
//   node kart_submit.mjs status SPOOL ID          queued, running, a status, unknown
//   node kart_submit.mjs result SPOOL ID          prints the result, or exits 1
//
// The task's files and environment as kart submit takes them (kart-task(5)
// cwd=, bind=, ro=, env=; each path made absolute and resolved here): -C
// DIR, --bind PATH, --ro PATH, -e NAME=VALUE (or -e NAME: the value from
// ours). Unlike kart submit, no cwd= unless asked: without one the task
// runs in a private /work, discarded at its end. The directives go after
// the file's own; with env= the file is made 0600.
//
// As a module:
//   import { Spool } from './kart_submit.mjs';
//   const s = new Spool(path);
//   const id = s.submit(data, name, { cwd, binds, ro, env });
//                                      // data: string (UTF-8) or Buffer; env: an
//                                      // object; no cwd: the private /work
//   s.status(id); s.result(id);        // result: an object, or null
//   await s.wait(id, timeoutSeconds);  // the result; rejects on a timeout
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const NAME_MAX = 200; // bytes; keep names to 190 so that NAME.N fits
const C = fs.constants;

// A directive value, escaped (section 3): %XX for '%', space, tab, '#',
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

// The #kart: lines of cwd=, bind=, ro= and env= (kart-task(5)): each path
// absolute and resolved, as the worker opens it as us; values escaped.
function directives({ cwd, binds = [], ro = [], env = {} } = {}) {
  const out = [];
  for (const [key, paths] of [['cwd', cwd === undefined || cwd === null ? [] : [cwd]], ['bind', binds], ['ro', ro]])
    for (const p of paths)
      out.push(Buffer.from(`#kart: ${key}=`), pctEncode(fs.realpathSync(p)), Buffer.from('\n'));
  for (const [k, v] of Object.entries(env || {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new RangeError(`not a variable name: ${JSON.stringify(k)}`);
    out.push(Buffer.from(`#kart: env=${k}=`), pctEncode(v), Buffer.from('\n'));
  }
  return Buffer.concat(out);
}

// data with block at the end of its leading comment block (the #! line,
// directives, comments), as kart submit adds its options: after the
// file's own, so that its lines keep their numbers.
function withDirectives(data, block) {
  if (!block.length) return data;
  let off = 0;
  while (off < data.length) {
    const nl = data.indexOf(0x0a, off);
    const end = nl < 0 ? data.length : nl;
    if (end === off || data[off] !== 0x23) break;
    off = nl < 0 ? data.length : nl + 1;
  }
  if (off && data[off - 1] !== 0x0a) block = Buffer.concat([Buffer.from('\n'), block]);
  return Buffer.concat([data.subarray(0, off), block, data.subarray(off)]);
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
  // In the order tasks move (spool-layout README section 5): new/ (held
  // too), every cur/*/, done/.
  idTaken(id) {
    return lexists(this.p('new', id)) || lexists(this.p('new', `.held.${id}`)) ||
      this.runningOn(id) !== null || lexists(this.p('done', `${id}.task`)) ||
      lexists(this.p('done', `${id}.json`)) || lexists(this.p('done', `${id}.attempts`));
  }

  *ids(name) {
    yield name;
    for (let n = 2; n < 1000000; n++) yield `${name}.${n}`;
  }

  // Queue data (string or Buffer) as a task; return its id. files: { cwd,
  // binds, ro, env } as kart submit's -C, --bind, --ro and -e.
  submit(data, name = 'task', files = {}) {
    if (typeof data === 'string') data = Buffer.from(data, 'utf8');
    else if (data instanceof Uint8Array) data = Buffer.from(data);
    else throw new TypeError('data must be a string or a Buffer');
    data = withDirectives(data, directives(files));
    // env= values are ours alone to read.
    const mode = files && files.env && Object.keys(files.env).length ? 0o600 : 0o640;
    const why = nameCheck(name);
    if (why) throw new RangeError(`not a task name: ${JSON.stringify(name)} (${why})`);
    let tmp, fd;
    for (;;) {
      tmp = this.p('tmp', `${Date.now()}.${process.pid}.${crypto.randomBytes(8).toString('hex')}`);
      try {
        fd = fs.openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
        break;
      } catch (e) {
        if (e.code !== 'EEXIST') throw e;
      }
    }
    let ino;
    try {
      ino = fs.fstatSync(fd, { bigint: true }).ino.toString(); // what the reservation names
    } finally {
      fs.closeSync(fd);
    }
    const ids = this.idsDir();
    let rid = null; // the id reserved in ids/, while it is ours to give back
    const release = () => {
      if (rid) try { fs.unlinkSync(path.join(ids, rid)); } catch { /* gone already */ }
      rid = null;
    };
    try {
      let written = null; // what the file holds: null, data, or data with name=
      for (const c of this.ids(name)) {
        if (Buffer.byteLength(c) > NAME_MAX) throw new Error(`no free id for ${name}`);
        rid = null;
        if (ids) {
          // An id seen taken needs no reservation; the look after the
          // reservation is the one that counts.
          if (this.idTaken(c)) continue;
          // Reserve first: symlink() fails when anyone holds it.
          try {
            fs.symlinkSync(ino, path.join(ids, c));
            rid = c;
          } catch (e) {
            if (e.code === 'EEXIST') continue;
            if (e.code !== 'EACCES' && e.code !== 'EPERM') throw e;
            // ids/ not ours to write: no reservation
          }
        }
        // Then look (a finisher links done/ID.task, then looks at ids/:
        // one of us sees the other).
        if (this.idTaken(c)) {
          release();
          continue;
        }
        const named = c !== name;
        if (written !== named) {
          // The same file (the same inode), rewritten.
          const body = named ? withName(data, name) : data;
          const wfd = fs.openSync(tmp, C.O_WRONLY | C.O_TRUNC | C.O_NOFOLLOW);
          try {
            for (let off = 0; off < body.length;) off += fs.writeSync(wfd, body, off);
            fs.fsyncSync(wfd); // a failed fsync is a failed submit: never retried
          } finally {
            fs.closeSync(wfd);
          }
          written = named;
        }
        if (rid) fsyncPath(ids); // the reservation is on disk before the task
        try {
          fs.linkSync(tmp, this.p('new', c));
        } catch (e) {
          if (e.code === 'EEXIST') {
            release(); // a task copied in under that name keeps it
            continue;
          }
          throw e;
        }
        rid = null; // published: the worker removes it with the result
        fs.unlinkSync(tmp);
        tmp = null;
        fsyncPath(this.p('new'));
        return c;
      }
      throw new Error(`no free id for ${name}`);
    } finally {
      release();
      if (tmp) try { fs.unlinkSync(tmp); } catch { /* gone already */ }
    }
  }

  // SPOOL/ids/ (section 5), made if missing where we may (a spool made
  // before it existed); null where there is none.
  idsDir() {
    const d = this.p('ids');
    try {
      fs.mkdirSync(d, 0o755);
    } catch { /* there already, or not ours to make */ }
    try {
      return fs.lstatSync(d).isDirectory() ? d : null;
    } catch {
      return null;
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
  // found, looking in the order tasks move (section 7).
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

export function submit(spool, data, name, files) {
  return new Spool(spool).submit(data, name, files);
}

async function main(argv) {
  const usage = 'usage: kart_submit.mjs [-C DIR] [--bind PATH] [--ro PATH] [-e NAME[=VALUE]]\n' +
    '                       SPOOL FILE|- [NAME]\n' +
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
    // Options anywhere, as kart submit's; -- ends them.
    const args = [], files = { binds: [], ro: [], env: {} };
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i];
      if (a === '--') { args.push(...argv.slice(i + 1)); break; }
      if (['-C', '--cwd', '--bind', '--ro', '-e', '--env'].includes(a)) {
        const v = argv[++i];
        if (v === undefined) { console.error(`kart_submit.mjs: ${a} needs a value\n${usage}`); return 2; }
        if (a === '-C' || a === '--cwd') files.cwd = v;
        else if (a === '--bind') files.binds.push(v);
        else if (a === '--ro') files.ro.push(v);
        else {
          const eq = v.indexOf('='), k = eq < 0 ? v : v.slice(0, eq);
          if (eq < 0 && process.env[k] === undefined) {
            console.error(`kart_submit.mjs: -e ${k}: give NAME=VALUE, or NAME of a variable that is set`);
            return 2;
          }
          files.env[k] = eq < 0 ? process.env[k] : v.slice(eq + 1);
        }
      } else if (a.startsWith('-') && a !== '-') {
        console.error(`kart_submit.mjs: unknown option ${a}\n${usage}`);
        return 2;
      } else args.push(a);
    }
    if (args.length !== 2 && args.length !== 3) {
      console.error(usage);
      return 2;
    }
    let data, base;
    if (args[1] === '-') {
      data = fs.readFileSync(0);
      base = 'stdin';
    } else {
      data = fs.readFileSync(args[1]);
      base = path.basename(args[1]);
      if (nameCheck(base)) base = 'task'; // as kart submit: a path that is no task name
    }
    console.log(new Spool(args[0]).submit(data, args.length === 3 ? args[2] : base, files));
    return 0;
  } catch (e) {
    console.error(`kart_submit.mjs: ${e.message}`);
    return 1;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  main(process.argv.slice(2)).then((rc) => { process.exitCode = rc; });
