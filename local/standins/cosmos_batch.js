"use strict";
/*
 * What Cosmos DB does with a transactional batch and a conditional patch, over the store of
 * @vercel/cosmosdb-server 1.0.1 (pinned in package.json): this module replaces three of its
 * request handlers before the library loads (`install`, called by the start-up script in
 * local/standins/cosmos_server.py). It owns those three answers only; it never changes how
 * the package stores, creates, replaces or queries documents, and reuses that code
 * (`documents.create/replace/delete`, `patchOperation`, the `@zeit/cosmosdb-query` engine).
 *
 * Why: the package runs a batch operation by operation (earlier operations stay written when
 * a later one fails), answers 200 instead of 207, has no patch operation in a batch, and its
 * single-document patch lower-cases a filter predicate (`c.orderVersion` became
 * `c.orderversion`, a property no document has). Markers and conditional changes would then
 * pass locally and fail in Azure.
 *
 * The batch, as the service answers it:
 * - All or nothing, in order: "If all operations succeed in the order they're described ...
 *   the transaction is committed. However, if any operation fails, the entire transaction is
 *   rolled back" (learn.microsoft.com/azure/cosmos-db/nosql/transactional-batch). Each
 *   operation runs on the package's store and leaves an undo step; the first failure undoes
 *   them all, last first. Node runs one request's handler to its end without yielding once
 *   the body is read, so no other request sees a half-applied batch (snapshot isolation).
 *   The batch is one transaction of the container's change log (cosmos_change_feed.js): its
 *   writes share one LSN, and a rolled-back batch leaves nothing in the change feed.
 * - The answer: 200 and one result per operation when all succeed; when one fails, 207
 *   Multi-Status, "the failed operation will have a status code of its corresponding error.
 *   All the other operations will have a 424 status code (failed dependency)" (same page).
 *   The 207 is what azure-sdk-for-java reads as a batch with a failed operation
 *   (BatchResponseParser.populateFromResponseContentAsync: MULTI_STATUS, then the first
 *   result that is not FAILED_DEPENDENCY); azure-cosmos raises CosmosBatchOperationError
 *   with that operation's index and status and every result (.venv/lib/python3.13/
 *   site-packages/azure/cosmos/aio/_cosmos_client_connection_async.py:2091-2114,
 *   _cosmos_client_connection.py:2255-2277).
 * - A result's fields are the service's JSON batch response as azure-sdk-for-java parses it
 *   (BatchRequestResponseConstants: statusCode, subStatusCode, requestCharge, eTag,
 *   resourceBody, retryAfterMilliseconds).
 * - The request, as azure-cosmos sends it (azure/cosmos/_base.py:1021-1081): headers
 *   x-ms-cosmos-is-batch-request, x-ms-cosmos-batch-atomic: true and the batch's partition key
 *   (x-ms-documentdb-partitionkey); a JSON array of {operationType: Create | Upsert | Read |
 *   Delete | Replace | Patch, id, resourceBody, ifMatch, ifNoneMatch}, a patch's resourceBody
 *   {operations, condition} (condition: the filter predicate).
 * - Per operation: a create of an existing id 409; a read, replace, delete or patch of a
 *   missing item 404; an ifMatch other than the item's _etag 412; a patch whose filter
 *   predicate the item does not satisfy 412 ("If the condition is satisfied the patch
 *   transaction will take place otherwise it will be returned with precondition failed",
 *   learn.microsoft.com/dotnet/api/microsoft.azure.cosmos.transactionalbatchpatchitemrequestoptions.filterpredicate;
 *   "the operation fails if the precondition specified in the predicate isn't satisfied",
 *   learn.microsoft.com/azure/cosmos-db/partial-document-update). A patch (add, set, replace,
 *   remove, incr, move; at most 10 per item, same page) is the package's own, written through
 *   its replace, so the item gets a new _etag and _ts.
 * - The whole request, before any operation: at most 100 operations and 2 MB ("Limitations",
 *   transactional-batch page); more operations 400 "Batch request has more operations than
 *   what is supported." (azure-cosmos-dotnet-v3#1057), none 400 (#605), a larger body 413
 *   (learn.microsoft.com/rest/api/cosmos-db/http-status-codes-for-cosmosdb); an operation on
 *   another partition key value than the batch's 400 "One or more operations within the batch
 *   request have a different partition key value than the request." (azure-sdk-for-js#17387).
 *
 * The single-document patch evaluates its filter predicate as written (case-sensitive
 * property names, on that item only) and answers 404 / 412 / 400 as above; a point read of a
 * missing item answers 404 where the package failed with 500 (it read a property of
 * `undefined`).
 *
 * Not reproduced (refused with 400 naming it, so that nothing relies on it by accident):
 * non-atomic batches (x-ms-cosmos-batch-atomic false: bulk), ifNoneMatch on a batch
 * operation. Not reproduced and not refused: the 5-second execution limit, request charges
 * (1 per successful operation, 0 otherwise, 1 in the header), sub-status codes and retry-after
 * (never throttles), a batch's per-item size limit (2 MB per item), an upsert with ifMatch of
 * a missing item (412 here, per RFC 9110 13.1.1; the service's answer is not documented),
 * minimal-response preference (resourceBody always returned), the exact error messages.
 */

const path = require("path");
const { changeLogOf } = require("./cosmos_change_feed");

const MAX_OPERATIONS = 100;
const MAX_BODY_BYTES = 2 * 1024 * 1024;
const PRECONDITION_FAILED = {
  code: "PreconditionFailed",
  message: "Operation cannot be performed because one of the specified precondition is not met."
};
const NOT_FOUND = {
  code: "NotFound",
  message: "Entity with the specified id does not exist in the system."
};

function badRequest(message) {
  return { statusCode: 400, body: { code: "BadRequest", message } };
}

/** The request's partition key value: the first element of the JSON array header. */
function partitionKeyOf(req) {
  const header = req.headers["x-ms-documentdb-partitionkey"];
  if (typeof header !== "string") return undefined;
  try {
    const parsed = JSON.parse(header);
    // [{}]: no partition key (a container partitioned by id), as the package reads it.
    const value = Array.isArray(parsed) && parsed.length === 1 ? parsed[0] : undefined;
    return value !== null && typeof value === "object" ? undefined : value;
  } catch (error) {
    return undefined;
  }
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function install(libraryDir) {
  const routes = require.resolve(path.join(libraryDir, "routes"));
  if (require.cache[routes]) {
    // routes.js reads each handler once, when it loads: a later replacement is never called.
    throw new Error("cosmos_batch.install must run before the library is loaded");
  }
  const handler = name => require(path.join(libraryDir, "handler", name));
  const { patchOperation } = handler("_patch-operations");
  const parseQuery = require(require.resolve("@zeit/cosmosdb-query", { paths: [libraryDir] }))
    .default;
  const stockRead = handler("read-document").default;

  /** Whether `item` satisfies a filter predicate, a from-clause ("FROM c WHERE ..."). */
  function satisfies(item, condition) {
    return parseQuery(`SELECT * ${condition}`).exec([item]).result.length > 0;
  }

  /** A patch of one item, conditions first; `undo` (if given) gets the step that reverts it. */
  function patchItem(collection, id, partitionKey, { operations, condition, ifMatch }, undo) {
    const documents = collection.documents;
    const stored = collection.document(id, partitionKey).read();
    if (!stored) return { statusCode: 404, body: NOT_FOUND };
    if (ifMatch !== undefined && ifMatch !== stored._etag) {
      return { statusCode: 412, body: PRECONDITION_FAILED };
    }
    if (!Array.isArray(operations)) {
      return badRequest("Invalid patch request: check syntax of patch specification.");
    }
    if (condition !== undefined && condition !== null) {
      let holds;
      try {
        holds = satisfies(stored, condition);
      } catch (error) {
        return badRequest(`Invalid filter predicate: ${error.message}`);
      }
      if (!holds) return { statusCode: 412, body: PRECONDITION_FAILED };
    }
    // The package's patch (operations, their errors, the write through replace), its
    // conditions already checked here.
    const result = patchOperation(collection, {
      id,
      partitionKey: JSON.stringify([partitionKey]),
      operations
    });
    if (result.statusCode < 400 && undo) undo.push(() => restore(documents, stored));
    return result;
  }

  /** Puts back `previous` as it was (same _rid, _etag, _ts) in place of its current version. */
  function restore(documents, previous) {
    const partition = documents._getPartition(previous);
    if (documents._item("/id", previous.id, partition).read()) {
      documents.delete(previous.id, partition);
    }
    documents._set(previous);
  }

  function conflictOrBadRequest(error) {
    if (error.conflict) return { statusCode: 409, body: { code: "Conflict", message: error.message } };
    if (error.badRequest) return badRequest(error.message);
    throw error;
  }

  function runOperation(collection, partitionKey, operation, undo) {
    const documents = collection.documents;
    const { operationType, id, resourceBody, ifMatch } = operation;
    const bodyId = resourceBody && resourceBody.id;
    const targetId = operationType === "Create" || operationType === "Upsert" ? bodyId : id;
    if (typeof targetId !== "string" || targetId === "") return badRequest("missing id");
    const stored = collection.document(targetId, partitionKey).read();
    const ifMatchFails = ifMatch !== undefined && (!stored || ifMatch !== stored._etag);
    switch (operationType) {
      case "Create": {
        if (stored) {
          return {
            statusCode: 409,
            body: { code: "Conflict", message: "Resource with specified id already exists." }
          };
        }
        let created;
        try {
          created = documents.create(resourceBody);
        } catch (error) {
          return conflictOrBadRequest(error);
        }
        undo.push(() => documents.delete(created.id, partitionKey));
        return { statusCode: 201, body: created };
      }
      case "Upsert":
      case "Replace": {
        if (operationType === "Replace" && !stored) return { statusCode: 404, body: NOT_FOUND };
        if (ifMatchFails) return { statusCode: 412, body: PRECONDITION_FAILED };
        if (operationType === "Replace" && bodyId !== id) {
          return badRequest("The id in the operation and in its resource body differ.");
        }
        let written;
        try {
          written = stored ? documents.replace(resourceBody, stored) : documents.create(resourceBody);
        } catch (error) {
          return conflictOrBadRequest(error);
        }
        undo.push(
          stored
            ? () => restore(documents, stored)
            : () => documents.delete(written.id, partitionKey)
        );
        return { statusCode: stored ? 200 : 201, body: written };
      }
      case "Read":
        return stored ? { statusCode: 200, body: stored } : { statusCode: 404, body: NOT_FOUND };
      case "Delete":
        if (!stored) return { statusCode: 404, body: NOT_FOUND };
        if (ifMatchFails) return { statusCode: 412, body: PRECONDITION_FAILED };
        documents.delete(id, partitionKey);
        undo.push(() => documents._set(stored));
        return { statusCode: 204, body: undefined };
      case "Patch":
        return patchItem(
          collection,
          id,
          partitionKey,
          {
            operations: resourceBody && resourceBody.operations,
            condition: resourceBody && resourceBody.condition,
            ifMatch
          },
          undo
        );
      default:
        return badRequest(`Operation type '${operationType}' is not supported in Batch.`);
    }
  }

  /** Whole-request checks: the answer that refuses the batch before any operation, or null. */
  function refusal(req, raw, operations, collection, partitionKey) {
    if (raw.length > MAX_BODY_BYTES) {
      return { statusCode: 413, body: { code: "RequestEntityTooLarge", message: "Request size is too large." } };
    }
    if (!Array.isArray(operations)) return badRequest("Invalid request body");
    if (operations.length === 0) {
      return badRequest("The batch request did not have any operations to be executed.");
    }
    if (operations.length > MAX_OPERATIONS) {
      return badRequest("Batch request has more operations than what is supported.");
    }
    if (String(req.headers["x-ms-cosmos-batch-atomic"]).toLowerCase() !== "true") {
      return badRequest("Non-atomic batches (bulk) are not reproduced by the local stand-in.");
    }
    if (partitionKey === undefined) return badRequest("A batch needs one partition key value.");
    for (const operation of operations) {
      if (!operation || typeof operation !== "object") return badRequest("Invalid operation");
      if (operation.ifNoneMatch !== undefined) {
        return badRequest("ifNoneMatch in a batch is not reproduced by the local stand-in.");
      }
      const body = operation.resourceBody;
      const hasItem = ["Create", "Upsert", "Replace"].includes(operation.operationType);
      if (hasItem && body && collection.documents._getPartition(body) !== partitionKey) {
        return badRequest(
          "One or more operations within the batch request have a different partition key " +
            "value than the request."
        );
      }
    }
    return null;
  }

  async function batch(account, req, res, { dbId, collId }) {
    const raw = await readBody(req);
    const collection = account.database(dbId).collection(collId);
    if (!collection.read()) {
      res.statusCode = 404;
      return NOT_FOUND;
    }
    let operations;
    try {
      operations = JSON.parse(raw.toString());
    } catch (error) {
      operations = undefined;
    }
    const partitionKey = partitionKeyOf(req);
    const refused = refusal(req, raw, operations, collection, partitionKey);
    if (refused) {
      res.statusCode = refused.statusCode;
      return refused.body;
    }
    // One transaction of the change log: one LSN for every write, none if it rolls back.
    const log = changeLogOf(collection.documents);
    return log.atomically(() => {
      const undo = [];
      const results = [];
      for (let index = 0; index < operations.length; index += 1) {
        const outcome = runOperation(collection, partitionKey, operations[index], undo);
        if (outcome.statusCode >= 400) {
          while (undo.length) undo.pop()();
          log.discard();
          res.statusCode = 207;
          return operations.map((_, other) =>
            other === index
              ? { statusCode: outcome.statusCode, subStatusCode: 0, requestCharge: 0 }
              : { statusCode: 424, requestCharge: 0 }
          );
        }
        const body = outcome.body;
        results.push({
          statusCode: outcome.statusCode,
          requestCharge: 1,
          ...(body ? { eTag: body._etag, resourceBody: body } : {})
        });
      }
      res.statusCode = 200;
      return results;
    });
  }

  async function patchDocument(account, req, res, { dbId, collId, docId }) {
    const raw = await readBody(req);
    const collection = account.database(dbId).collection(collId);
    let body;
    try {
      body = JSON.parse(raw.toString());
    } catch (error) {
      body = undefined;
    }
    const partitionKey = partitionKeyOf(req);
    let result;
    if (!collection.read()) result = { statusCode: 404, body: NOT_FOUND };
    else if (!body || typeof body !== "object") result = badRequest("Invalid patch request.");
    else {
      result = patchItem(collection, docId, partitionKey === undefined ? docId : partitionKey, {
        operations: Array.isArray(body) ? body : body.operations,
        condition: Array.isArray(body) ? undefined : body.condition,
        ifMatch: req.headers["if-match"]
      });
    }
    res.statusCode = result.statusCode;
    return result.body;
  }

  function readDocument(account, req, res, params) {
    const collection = account.database(params.dbId).collection(params.collId);
    const partitionKey = partitionKeyOf(req);
    if (
      collection.read() &&
      partitionKey !== undefined &&
      !collection.document(params.docId, partitionKey).read()
    ) {
      res.statusCode = 404;
      return NOT_FOUND;
    }
    return stockRead(account, req, res, params);
  }

  handler("batch-documents").default = batch;
  handler("patch-document").default = patchDocument;
  handler("read-document").default = readDocument;
}

module.exports = { install, partitionKeyOf };
