/** The dashboard's entry point: styles, then the app into #app. */
import "./styles.css"
import { render } from "preact"
import { App } from "./app.tsx"

render(<App />, document.getElementById("app")!)
