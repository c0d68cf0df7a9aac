// Entry point: styles, the router's link handling, and the shell.

import { render } from "preact";
import { Shell } from "./app";
import { installRouter } from "./router";
import "./styles.css";

installRouter();
render(<Shell />, document.getElementById("root")!);
