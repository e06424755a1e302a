// placeholder: replaced by the real page module
import { page, h } from "./ui.js";
export async function streamsPage(main, params) { page(main, { title: "streamsPage" }).append(h("p", {}, JSON.stringify(params))); }
export async function streamPage(main, params) { page(main, { title: "streamPage" }).append(h("p", {}, JSON.stringify(params))); }
export async function objectPage(main, params) { page(main, { title: "objectPage" }).append(h("p", {}, JSON.stringify(params))); }
