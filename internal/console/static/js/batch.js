// placeholder: replaced by the real page module
import { page, h } from "./ui.js";
export async function batchListPage(main, params) { page(main, { title: "batchListPage" }).append(h("p", {}, JSON.stringify(params))); }
export async function batchPage(main, params) { page(main, { title: "batchPage" }).append(h("p", {}, JSON.stringify(params))); }
export async function instancePage(main, params) { page(main, { title: "instancePage" }).append(h("p", {}, JSON.stringify(params))); }
