// placeholder: replaced by the real page module
import { page, h } from "./ui.js";
export async function tasksPage(main, params) { page(main, { title: "tasksPage" }).append(h("p", {}, JSON.stringify(params))); }
export async function taskPage(main, params) { page(main, { title: "taskPage" }).append(h("p", {}, JSON.stringify(params))); }
