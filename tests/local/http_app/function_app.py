"""An app of HTTP-triggered functions for the local HTTP host's tests
(tests/local/test_http_host.py): Microsoft's worker loads this directory as it loads the product's
(``FunctionsWorker.start``), and its host.json sets the route prefix ``edge``. Each function
answers what it was given, so that a test reads through a real HTTP client what the host handed
the worker."""

import json
from urllib.parse import quote

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="orders/{orderId}", methods=["GET"])
def get_order(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    seen = {
        "function": "get_order",
        "orderId": req.route_params.get("orderId"),
        "method": req.method,
        "url": req.url,
        "query": dict(req.params),
        "note": req.headers.get("x-note"),
        "body": req.get_body().decode(),
        "traceparent": context.trace_context.trace_parent,
    }
    return func.HttpResponse(
        json.dumps(seen),
        status_code=200,
        mimetype="application/json",
        # Quoted: a route value may hold a newline, which a header value must not.
        headers={"x-order-id": quote(str(req.route_params.get("orderId")), safe="")},
    )


@app.route(route="orders/latest", methods=["GET"])
def latest_order(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps({"function": "latest_order"}), mimetype="application/json")


@app.route(route="orders", methods=["POST"], auth_level=func.AuthLevel.FUNCTION)
async def create_order(req: func.HttpRequest) -> func.HttpResponse:
    order = req.get_json()
    return func.HttpResponse(
        json.dumps({"received": order}),
        status_code=201,
        mimetype="application/json",
        headers={
            "Location": f"/edge/orders/{order['orderId']}",
            "Set-Cookie": "session=abc; Path=/orders; HttpOnly",
        },
    )


@app.route(route="stock/{sku:alpha}", methods=["GET"])
def stock_item(req: func.HttpRequest) -> str:
    return f"stock of {req.route_params['sku']}"


@app.route(route="boom", methods=["GET"])
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("the function failed")


@app.route(route="purge", methods=["POST"], auth_level=func.AuthLevel.ADMIN)
def purge(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(status_code=204)


@app.route(route="echo", methods=["PUT"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(req.get_body(), mimetype="application/octet-stream")
