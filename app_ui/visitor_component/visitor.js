// The visitor's cookie (app_ui/visitor.py): keep the signed cookie the server gives when the browser holds
// none (or, when asked, replace one the server found invalid), and send back the one the browser now holds,
// so the session that set it becomes that visitor at once. Nothing is shown; nothing is loaded from elsewhere.
// This frame is served by the app itself (same origin), so its cookie is the app's and reaches the server
// with every new session (a new tab, a reload).

let sent = null;

function send(type, data) {
  window.parent.postMessage({ isStreamlitMessage: true, type, ...data }, "*");
}

function held(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return rest.join("=");
  }
  return "";
}

function render(args) {
  const name = String(args.name || "");
  if (!/^[A-Za-z0-9_]+$/.test(name)) return;
  const offered = String(args.cookie || "");
  if (/^[A-Za-z0-9_.-]+$/.test(offered) && (args.replace || !held(name))) {
    const secure = window.location.protocol === "https:" ? "; Secure" : "";
    document.cookie = `${name}=${offered}; Max-Age=${Number(args.max_age) || 0}; Path=/; SameSite=Strict${secure}`;
  }
  const now = held(name);
  if (now !== sent) {
    sent = now;
    send("streamlit:setComponentValue", { value: now, dataType: "json" });
  }
}

window.addEventListener("message", (event) => {
  if (event.data && event.data.type === "streamlit:render") render(event.data.args || {});
});
send("streamlit:componentReady", { apiVersion: 1 });
send("streamlit:setFrameHeight", { height: 0 });
