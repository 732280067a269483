// Try it, MCP Apps: the page hosts the tool's view as a client that renders MCP Apps does
// (SEP-1865, the io.modelcontextprotocol/ui extension, revision 2026-01-26). The view runs in
// an iframe sandboxed to scripts only (an opaque origin: no cookies, no access to this page),
// served under the CSP built from its _meta.ui. It speaks JSON-RPC over postMessage: it asks
// ui/initialize, says ui/notifications/initialized, and only then is handed the call's
// arguments (ui/notifications/tool-input) and result (ui/notifications/tool-result). The page
// proxies nothing to the server: the view's own requests (tools/call, ...) are refused.
"use strict";
(function () {
  const PROTOCOL_VERSION = "2026-01-26";
  const MAX_HEIGHT = 2000;

  function start() {
    const slot = document.getElementById("try-it-view");
    const source = document.getElementById("try-it-host");
    if (!slot || !source) return;
    const host = JSON.parse(source.textContent);
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "allow-scripts");
    if (slot.dataset.allow) frame.setAttribute("allow", slot.dataset.allow);
    frame.title = "The tool's view";
    frame.className = "mcp-app-view";
    let initialized = false;

    function post(message) {
      // An opaque origin has no name to address it by: "*", with replies only to this frame.
      frame.contentWindow.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");
    }

    function answer(message) {
      if (message.method === "ui/initialize") {
        return {
          result: {
            protocolVersion: PROTOCOL_VERSION,
            hostInfo: { name: "mcphost-admin", version: "try-it" },
            hostCapabilities: {},
            hostContext: {
              toolInfo: { tool: host.tool },
              displayMode: "inline",
              availableDisplayModes: ["inline"],
              platform: "web",
            },
          },
        };
      }
      if (message.method === "ping") return { result: {} };
      return {
        error: { code: -32601, message: "The try-it page does not serve " + message.method + "." },
      };
    }

    window.addEventListener("message", function (event) {
      if (event.source !== frame.contentWindow) return;
      const message = event.data;
      if (!message || message.jsonrpc !== "2.0" || typeof message.method !== "string") return;
      if ("id" in message) {
        post(Object.assign({ id: message.id }, answer(message)));
      } else if (message.method === "ui/notifications/initialized" && !initialized) {
        initialized = true;
        post({ method: "ui/notifications/tool-input", params: { arguments: host.arguments } });
        post({ method: "ui/notifications/tool-result", params: host.result });
        slot.dataset.delivered = "true";
      } else if (message.method === "ui/notifications/size-changed") {
        const height = message.params && message.params.height;
        if (typeof height === "number" && height > 0) {
          frame.style.height = Math.min(Math.ceil(height), MAX_HEIGHT) + "px";
        }
      }
    });
    // Listening before the frame exists: its ui/initialize cannot come first.
    frame.src = slot.dataset.src;
    slot.appendChild(frame);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
