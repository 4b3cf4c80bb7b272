"use strict";
/*
 * A query scoped to one partition key value reads that logical partition only, as in Cosmos
 * DB, over the store of @vercel/cosmosdb-server 1.0.1 (pinned in package.json): `install`
 * (called by the start-up script in local/standins/cosmos_server.py before the library loads)
 * keeps an index of each container's documents by partition key value and replaces the
 * package's query handler, which ran every query over every document of the container. It
 * owns that index and the choice of documents a query runs over; the query itself is the
 * package's engine (@zeit/cosmosdb-query), with the package's own options and answers.
 *
 * Why: the package has no index, so `python -m ops stock audit` (one query per SKU, scoped to
 * the SKU's partition: ops/cosmos_inventory.py `partition`) cost a scan of the whole inventory
 * container per SKU, too slow for `make chaos` at its volume.
 *
 * The service: "if the query has a partition key filter specified, Azure Cosmos DB
 * automatically optimizes the query. It routes the query to the physical partitions
 * corresponding to the partition key values specified in the filter"
 * (learn.microsoft.com/azure/cosmos-db/how-to-query-container, In-partition query), and
 * azure-cosmos sends a query's `partition_key` ("Partition key at which the query request is
 * targeted", .venv/lib/python3.13/site-packages/azure/cosmos/aio/_container.py:596) as the
 * `x-ms-documentdb-partitionkey` header. Here, with that header, the query runs over the
 * documents whose partition key value is the header's (what such a query can return in the
 * service: nothing of another partition); without it (cross-partition), over all of them, as
 * before. The package's own refusal of a query without its partition key (400 "missing
 * partition keys" when cross-partition is not enabled) is kept as it was.
 *
 * The package's query engine also built every result by copying: its generated FROM clause
 * appends each row with `[...$, row]` in a reduce, and `helpers.stripUndefined` each result
 * with `[...o, v]`, so one read of a container of N documents cost N^2/2 copies (20,000
 * documents: 11 s; 40,000: minutes, past the SDK's read timeout). `linearQueries` rewrites
 * the generated code's `[...$, a, ...b]` (the reduce's accumulator, a fresh `[]` per run) into
 * an append, and stripUndefined into a loop: the same results, in linear time.
 *
 * Not reproduced: any other index (range, composite, spatial: a filter on another property
 * still reads the whole partition or container here), hierarchical partition keys (a header of
 * several values is not scoped: all documents, as before).
 */

const path = require("path");
const { partitionKeyOf } = require("./cosmos_batch");

const indexes = new WeakMap();

/** The container's documents by partition key value: value -> Set of _rid, in store order. */
function indexOf(documents) {
  let index = indexes.get(documents);
  if (!index) {
    index = new Map();
    indexes.set(documents, index);
  }
  return index;
}

/** The package's Items.query (lib/account/items.js), over the partition's documents only. */
function queryPartition(documents, partitionKey, params, { maxItemCount, continuation }) {
  const parent = documents._parent.read();
  if (!parent) return null;
  const rids = indexOf(documents).get(partitionKey) || new Set();
  const data = [...rids].map(rid => documents._data.get(rid).read());
  const compositeIndexes =
    (parent.indexingPolicy ? parent.indexingPolicy.compositeIndexes : null) || [];
  try {
    return documents._getQuery(params.query).exec(data, {
      parameters: params.parameters,
      udf: documents._userDefinedFunctions(),
      maxItemCount,
      continuation,
      compositeIndexes
    });
  } catch (err) {
    err.badRequest = true;
    throw err;
  }
}

/** Appends `items` to the reduce's accumulator `$` (its own fresh array) and returns it. */
function append(accumulator, items) {
  for (const item of items) accumulator.push(item);
  return accumulator;
}

/** helpers.stripUndefined (lib/helpers.js) without its quadratic copy: same result. */
function stripUndefined(value) {
  if (Array.isArray(value)) {
    const kept = [];
    for (const item of value) if (typeof item !== "undefined") kept.push(stripUndefined(item));
    return kept;
  }
  if (value && typeof value === "object") {
    const kept = {};
    for (const [key, item] of Object.entries(value)) {
      if (typeof item !== "undefined") kept[key] = stripUndefined(item);
    }
    return kept;
  }
  return value;
}

/** `[...$, a, ...b]` -> `$h.append($, [a, ...b])`, everywhere in a generated JS AST. */
function appendInsteadOfCopy(node) {
  if (Array.isArray(node)) return node.map(appendInsteadOfCopy);
  if (!node || typeof node !== "object") return node;
  const copied = {};
  for (const [key, child] of Object.entries(node)) copied[key] = appendInsteadOfCopy(child);
  const [first, ...rest] = copied.type === "ArrayExpression" ? copied.elements : [];
  if (first && first.type === "SpreadElement" && first.argument.type === "Identifier" && first.argument.name === "$") {
    return {
      type: "CallExpression",
      callee: {
        type: "MemberExpression",
        object: { type: "Identifier", name: "$h" },
        property: { type: "Identifier", name: "append" }
      },
      arguments: [first.argument, { type: "ArrayExpression", elements: rest }]
    };
  }
  return copied;
}

function linearQueries(libraryDir) {
  const engine = name =>
    require(require.resolve(`@zeit/cosmosdb-query/lib/${name}`, { paths: [libraryDir] }));
  const helpers = engine("helpers");
  const transformer = engine("transformer");
  helpers.append = append;
  helpers.stripUndefined = stripUndefined;
  const transform = transformer.default;
  transformer.default = (...args) => appendInsteadOfCopy(transform(...args));
}

function install(libraryDir) {
  if (require.cache[require.resolve(path.join(libraryDir, "routes"))]) {
    // routes.js reads each handler once, when it loads: a later replacement is never called.
    throw new Error("cosmos_partition_index.install must run before the library is loaded");
  }
  linearQueries(libraryDir);
  const Documents = require(path.join(libraryDir, "account", "documents")).default;
  const handler = name => require(path.join(libraryDir, "handler", name));
  const readItems = handler("_read-items").default;
  const json = require(path.join(libraryDir, "json")).default;
  const trueHeader = require(path.join(libraryDir, "true-header")).default;
  const parseQuery = require(require.resolve("@zeit/cosmosdb-query", { paths: [libraryDir] }))
    .default;

  // Every document enters the store through `_set` and leaves it through `delete` (a replace
  // is both; a batch's undo too), so the index follows the store exactly.
  const set = Documents.prototype._set;
  const remove = Documents.prototype.delete;
  Documents.prototype._set = function indexedSet(data) {
    const stored = set.call(this, data);
    const index = indexOf(this);
    const partitionKey = this._getPartition(data);
    if (!index.has(partitionKey)) index.set(partitionKey, new Set());
    index.get(partitionKey).add(data._rid);
    return stored;
  };
  Documents.prototype.delete = function indexedDelete(idOrRid, partition) {
    const stored = this._item("/id", idOrRid, partition).read();
    const result = remove.call(this, idOrRid, partition);
    if (stored) {
      const rids = indexOf(this).get(this._getPartition(stored));
      if (rids) rids.delete(stored._rid);
    }
    return result;
  };

  // The package's query-documents handler (lib/handler/query-documents.js), scoped by the
  // request's partition key value when it has one.
  handler("query-documents").default = (account, req, res, { dbId, collId }) =>
    readItems(req, res, "Documents", async ({ continuation, maxItemCount }) => {
      const body = await json(req);
      if (!body.query) {
        res.statusCode = 400;
        return { message: "missing query" };
      }
      const collection = account.database(dbId).collection(collId);
      if (!trueHeader(req, "x-ms-documentdb-query-enablecrosspartition")) {
        const { partitionKey } = collection.read() || {};
        const paths = (partitionKey || {}).paths || [];
        if (paths.length && !parseQuery(body.query).containsPartitionKeys(paths)) {
          res.statusCode = 400;
          return { message: "missing partition keys" };
        }
      }
      const partitionKey = partitionKeyOf(req);
      try {
        return partitionKey === undefined
          ? collection.documents.query(body, { continuation, maxItemCount })
          : queryPartition(collection.documents, partitionKey, body, {
              continuation,
              maxItemCount
            });
      } catch (err) {
        if (err.badRequest) {
          res.statusCode = 400;
          return { message: err.message };
        }
        throw err;
      }
    });
}

module.exports = { install };
