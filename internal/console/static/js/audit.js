// placeholder: replaced by the real page module
import { page, h } from "./ui.js";
export async function auditPage(main, params) { page(main, { title: "auditPage" }).append(h("p", {}, JSON.stringify(params))); }
