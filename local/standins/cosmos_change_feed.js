"use strict";
/*
 * The Cosmos DB change feed, latest-version mode, as the service serves it to its clients, over
 * the store of @vercel/cosmosdb-server 1.0.1 (which has none): every container keeps an
 * append-only change log, one logical sequence number (LSN) per committed write, and a read of
 * the feed is a seek into that log, never a scan of the documents. `install` (called by the
 * start-up script in local/standins/cosmos_server.py before the library loads) hooks the
 * package's store and replaces its ReadFeed handler; `changeLogOf(documents)` is the log the
 * batch handler (cosmos_batch.js) commits or discards a transaction in. It owns the log and the
 * feed's answers only; it never changes what the store keeps or how it answers anything else.
 *
 * The request, as azure-cosmos sends it (.venv/lib/python3.13/site-packages/azure/cosmos/
 * _change_feed/change_feed_state.py and change_feed_start_from.py, through
 * aio/_cosmos_client_connection_async.py `_QueryChangeFeed`): GET .../colls/{coll}/docs with
 * `A-IM: Incremental Feed`, `x-ms-documentdb-partitionkeyrangeid` (the range's id) and
 * `If-None-Match`: absent from the beginning, `*` from now, else the continuation (an etag);
 * `If-Modified-Since` for a point in time; `x-ms-max-item-count` when the caller bounds a page.
 * The REST API's List Documents page (learn.microsoft.com/rest/api/cosmos-db/list-documents):
 * If-None-Match "No header: returns all changes from the beginning (collection creation)",
 * "*": "returns all new changes to data within the collection", "<etag>: ... returns all
 * changes made since that logical timestamp"; If-Modified-Since "ignored if If-None-Match is
 * specified", and with it "your request will return not the documents themselves, but rather
 * the continuation token or etag in the response header"; the response's `etag` is "The
 * logical sequence number (LSN) of last document returned in the response. Incremental
 * ReadDocumentFeed can be resumed by resubmitting this value in If-None-Match", quoted in its
 * sample (`If-None-Match: "28535"`).
 *
 * The answer:
 * - 200 with the page (`{_rid, Documents, _count}`, `x-ms-item-count`) and `etag` the LSN of
 *   its last item; 304 Not Modified with `etag` the LSN read up to when nothing is new (the SDK
 *   takes the etag of either as its next continuation: change_feed_fetcher.py
 *   `apply_server_response_continuation`, and ends the iteration on an empty page).
 * - Latest version mode: each created or updated item once, in its latest version, at the
 *   place of its latest change, in the order of modification; "Only the most recent change for
 *   a given item is included", deletes are not (learn.microsoft.com/azure/cosmos-db/nosql/
 *   change-feed-modes, "Latest version change feed mode"). An entry of the log whose item has
 *   changed since (or gone) is stepped over: a seek costs the changes it reads past, not the
 *   container. Each item carries `_lsn`, its change's LSN (as feed items do: the Spark
 *   connector reads `feedItem.getInt("_lsn")`, Azure/azure-cosmosdb-spark#425).
 * - A transaction is one LSN and is never split across pages: "if you create 10 item in a
 *   Sproc execution or using Transactional Batch, they all have the same LSN, if you read the
 *   Change Feed with a max items header of 5, the backend will always return 10"
 *   (azure-cosmos-dotnet-v3#2644, a maintainer's answer). A single write is a transaction of
 *   its own; a replace is one write (the package stores it as a delete and a set); a batch
 *   that rolls back leaves nothing in the log; a delete consumes an LSN and delivers nothing.
 * - `x-ms-max-item-count` bounds a page (a transaction excepted); absent or -1, a page holds
 *   at most DEFAULT_PAGE_SIZE items (the service's default for the change feed is not
 *   documented on the pages above: an assumption).
 *
 * Not reproduced: more than one range (cosmosdb-server has one, id "0": no splits or merges,
 * so no 410 Gone; a request for another range, or scoped to part of a range (a partition key
 * or feed range, the SDK's `x-ms-read-key-type`/`x-ms-start-epk`/`x-ms-end-epk` headers) is
 * refused with 400 naming it, so nothing relies on it by accident), the all-versions-and-deletes
 * mode (`A-IM: Full-Fidelity Feed`: refused with 400), the service's LSN values (here 1, 2, 3
 * ... per container from its creation, LSNs of the service are per physical partition and
 * start elsewhere; only their order and the etag's shape are the service's), session tokens,
 * request charges, and the feed's retention of items deleted later (gone here, as there).
 */

const path = require("path");

const DEFAULT_PAGE_SIZE = 100;
const THE_ONE_RANGE = "0";
const NOT_FOUND = {
  code: "NotFound",
  message: "Entity with the specified id does not exist in the system."
};

/** A container's change log: its committed transactions in LSN order. */
class ChangeLog {
  constructor() {
    // transactions[lsn - 1]: the items its commit wrote (a delete writes none) and when.
    this.transactions = [];
    this.latest = new Map(); // _rid -> the LSN of the item's latest version; absent: deleted
    this.pending = null; // _rid -> written (true) or deleted (false), while a transaction is open
  }

  get lsn() {
    return this.transactions.length;
  }

  /** Runs `run` as one transaction (joining the open one, if any); commits what it wrote. */
  atomically(run) {
    if (this.pending) return run();
    this.pending = new Map();
    try {
      return run();
    } finally {
      const changes = this.pending;
      this.pending = null;
      this.commit(changes);
    }
  }

  /** Forgets the open transaction's writes: the batch rolled them back. */
  discard() {
    if (this.pending) this.pending.clear();
  }

  record(rid, written) {
    if (this.pending) this.pending.set(rid, written);
    else this.commit(new Map([[rid, written]]));
  }

  commit(changes) {
    if (changes.size === 0) return;
    const lsn = this.transactions.length + 1;
    const written = [];
    for (const [rid, isWrite] of changes) {
      if (isWrite) {
        this.latest.set(rid, lsn);
        written.push(rid);
      } else {
        this.latest.delete(rid);
      }
    }
    this.transactions.push({ written, ts: Date.now() / 1000 });
  }

  /** The latest versions changed after `since`, whole transactions, until `maxItems` are
   * reached: `{lsn, rids}`, `lsn` the last one read (the next continuation). */
  read(since, maxItems) {
    const rids = [];
    let lsn = since;
    while (lsn < this.transactions.length && rids.length < maxItems) {
      lsn += 1;
      for (const rid of this.transactions[lsn - 1].written) {
        if (this.latest.get(rid) === lsn) rids.push(rid);
      }
    }
    return { lsn, rids };
  }

  /** The last LSN committed before `seconds` (epoch): where a point-in-time start begins. */
  lsnBefore(seconds) {
    let low = 0;
    let high = this.transactions.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.transactions[middle].ts < seconds) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}

const logs = new WeakMap();

/** The change log of a container's documents (the package's `Documents` store). */
function changeLogOf(documents) {
  let log = logs.get(documents);
  if (!log) {
    log = new ChangeLog();
    logs.set(documents, log);
  }
  return log;
}

function answer(res, statusCode, code, message) {
  res.statusCode = statusCode;
  return { code, message };
}

/** The LSN an `If-None-Match` continuation names, or undefined. */
function lsnOf(etag) {
  const match = /^"?(\d+)"?$/.exec(String(etag).trim());
  return match ? Number(match[1]) : undefined;
}

function install(libraryDir) {
  if (require.cache[require.resolve(path.join(libraryDir, "routes"))]) {
    // routes.js reads each handler once, when it loads: a later replacement is never called.
    throw new Error("cosmos_change_feed.install must run before the library is loaded");
  }
  const Documents = require(path.join(libraryDir, "account", "documents")).default;
  const handler = name => require(path.join(libraryDir, "handler", name));
  const stockReadDocuments = handler("read-documents").default;

  // Every write of the store goes through `_set` (create; replace after its delete; a batch's
  // undo) or `delete`; the public writes are transactions of their own, or join the batch's.
  const set = Documents.prototype._set;
  const remove = Documents.prototype.delete;
  const create = Documents.prototype.create;
  const replace = Documents.prototype.replace;
  Documents.prototype._set = function loggedSet(data) {
    const stored = set.call(this, data);
    changeLogOf(this).record(data._rid, true);
    return stored;
  };
  Documents.prototype.delete = function loggedDelete(idOrRid, partition) {
    const stored = this._item("/id", idOrRid, partition).read();
    const log = changeLogOf(this);
    return log.atomically(() => {
      const result = remove.call(this, idOrRid, partition);
      if (stored) log.record(stored._rid, false);
      return result;
    });
  };
  Documents.prototype.create = function loggedCreate(data) {
    return changeLogOf(this).atomically(() => create.call(this, data));
  };
  Documents.prototype.replace = function loggedReplace(data, original) {
    return changeLogOf(this).atomically(() => replace.call(this, data, original));
  };

  function readFeed(account, req, res, params) {
    const mode = req.headers["a-im"];
    if (mode === undefined) return stockReadDocuments(account, req, res, params);
    // The package's request handler (lib/index.js) turns any 200 to a request with A-IM and
    // If-None-Match into 304 with etag "1" after the handler returns: this answer is the
    // feed's own, so the header is consumed here.
    delete req.headers["a-im"];
    const collection = account.database(params.dbId).collection(params.collId);
    if (!collection.read()) {
      res.statusCode = 404;
      return NOT_FOUND;
    }
    if (String(mode).toLowerCase() !== "incremental feed") {
      return answer(res, 400, "BadRequest", `A-IM '${mode}' is not reproduced by the local stand-in.`);
    }
    const range = req.headers["x-ms-documentdb-partitionkeyrangeid"];
    if (range !== undefined && String(range) !== THE_ONE_RANGE) {
      return answer(res, 400, "BadRequest", `The local stand-in has one range, "0", not '${range}'.`);
    }
    if (req.headers["x-ms-read-key-type"] !== undefined || req.headers["x-ms-start-epk"] !== undefined) {
      return answer(
        res,
        400,
        "BadRequest",
        "A change feed scoped to a partition key or a feed range is not reproduced by the local stand-in."
      );
    }
    const log = changeLogOf(collection.documents);
    const continuation = req.headers["if-none-match"];
    const since = req.headers["if-modified-since"];
    let from;
    if (continuation === "*") from = log.lsn;
    else if (continuation !== undefined) from = lsnOf(continuation);
    else if (since !== undefined) {
      const time = Date.parse(since);
      if (Number.isNaN(time)) return answer(res, 400, "BadRequest", "Invalid If-Modified-Since.");
      res.setHeader("etag", `"${log.lsnBefore(time / 1000)}"`);
      res.statusCode = 304; // the continuation only (List Documents page, quoted above)
      return {};
    } else from = 0;
    if (from === undefined || from > log.lsn) {
      return answer(res, 400, "BadRequest", "Invalid continuation (If-None-Match) for this container.");
    }
    const requested = parseInt(req.headers["x-ms-max-item-count"], 10);
    const pageSize = requested > 0 ? requested : DEFAULT_PAGE_SIZE;
    const { lsn, rids } = log.read(from, pageSize);
    res.setHeader("etag", `"${lsn}"`);
    if (rids.length === 0) {
      res.statusCode = 304;
      return {};
    }
    const documents = rids.map(rid => ({
      ...collection.documents._data.get(rid).read(),
      _lsn: log.latest.get(rid)
    }));
    res.setHeader("x-ms-item-count", String(documents.length));
    return { _rid: collection.read()._rid, Documents: documents, _count: documents.length };
  }

  handler("read-documents").default = readFeed;
}

module.exports = { install, changeLogOf };
