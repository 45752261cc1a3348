// Chats in and out as files: Export downloads the open chat as <ctxid>.json in Agent Zero's
// chat.json shape (chat_export); Import chats sends the chosen .json files to chat_load
// (ours or Agent Zero's) and opens the first chat made.

import { callApi } from "./api.js";

const $ = (id) => document.getElementById(id);

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.setAttribute("data-testid", "chat-export-link");
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

export function initChatTransfer(currentContext, selectChat, act) {
  $("export-chat").addEventListener("click", () =>
    act(async () => {
      const context = currentContext();
      if (!context) return;
      const result = await callApi("chat_export", { ctxid: context });
      download(`${result.ctxid}.json`, result.content);
    }),
  );
  const input = $("chat-import");
  input.addEventListener("change", () =>
    act(async () => {
      const chosen = [...input.files];
      input.value = "";
      if (!chosen.length) return;
      const chats = await Promise.all(chosen.map((file) => file.text()));
      const result = await callApi("chat_load", { chats });
      if (result.ctxids.length) selectChat(result.ctxids[0]);
    }),
  );
}
