/// The one page the web table serves.
///
/// Markup and style are here, the script in `WebTableScript`. No framework, no build step: the browser runs it as
/// written.
enum WebTablePage {
    /// The page of a server whose socket needs `secret` (the script reads it from the page and sends it back).
    static func html(secret: String) -> String {
        shell.replacingOccurrences(of: secretPlaceholder, with: secret)
    }

    private static let secretPlaceholder = "@@SECRET@@"

    private static let shell = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="ocd-secret" content="\(secretPlaceholder)">
        <title>OpenCoreData live table</title>
        <style>
        \(style)
        </style>
        </head>
        <body>
        <header>
          <h1 id="title">…</h1>
          <span id="actions"></span>
          <span id="status">connecting…</span>
        </header>
        <div id="error" role="alert" hidden></div>
        <main>
          <div id="scroller" tabindex="0"><div id="spacer"></div></div>
          <nav id="index" aria-label="Section index"></nav>
        </main>
        <script>
        \(WebTableScript.source)
        </script>
        </body>
        </html>
        """

    static let style = """
        :root { --row: 28px; --header: 30px; font-family: system-ui, sans-serif; font-size: 15px; }
        * { box-sizing: border-box; }
        body { margin: 0; height: 100vh; display: flex; flex-direction: column; background: #fafafa; color: #222; }
        header { display: flex; align-items: center; gap: 12px; padding: 8px 12px; background: #2d3e50; color: #fff; }
        header h1 { font-size: 17px; margin: 0; flex: 0 0 auto; }
        header #status { margin-left: auto; opacity: .85; font-variant-numeric: tabular-nums; }
        header button { font: inherit; padding: 3px 10px; border-radius: 4px; border: 1px solid #fff6; background: #fff2; color: #fff; cursor: pointer; }
        #error { background: #b3261e; color: #fff; padding: 6px 12px; }
        main { flex: 1; display: flex; min-height: 0; }
        #scroller { flex: 1; overflow-y: auto; position: relative; outline: none; }
        #spacer { position: relative; width: 100%; }
        .section { position: absolute; left: 0; right: 0; transition: top .25s ease; }
        .section > .header { position: sticky; top: 0; height: var(--header); line-height: var(--header); padding: 0 12px;
          background: #e8ecf0; font-weight: 600; z-index: 1; border-bottom: 1px solid #d5dbe1; }
        .section.deleted { opacity: 0; transition: opacity .3s; pointer-events: none; }
        .row { position: absolute; left: 0; right: 0; height: var(--row); line-height: var(--row); padding: 0 44px 0 16px;
          white-space: pre; overflow: hidden; text-overflow: ellipsis; border-bottom: 1px solid #eee; background: #fff;
          transition: top .25s ease, background-color .6s; cursor: default; }
        .row.selected { background: #dbe9ff; }
        .row.inserted { animation: inserted .8s ease; }
        .row.updated { animation: updated .8s ease; }
        .row.moved { animation: moved .8s ease; }
        .row.deleted { opacity: 0; transform: translateX(40px); transition: opacity .3s, transform .3s; pointer-events: none; }
        .section.inserted > .header { animation: inserted .8s ease; }
        @keyframes inserted { from { background: #c8f2c8; opacity: .2; } to { background: #fff; opacity: 1; } }
        @keyframes updated { from { background: #fff3b0; } to { background: #fff; } }
        @keyframes moved { from { background: #d6e4ff; } to { background: #fff; } }
        .row button { position: absolute; right: 8px; top: 3px; height: 22px; width: 26px; border: 0; border-radius: 4px;
          background: transparent; color: #b3261e; cursor: pointer; visibility: hidden; }
        .row:hover button, .row.selected button { visibility: visible; }
        .row button::before { content: attr(data-label); }
        .pending { position: absolute; left: 0; right: 0; background: repeating-linear-gradient(#f3f3f3 0 27px, #eee 27px 28px); }
        #index { display: flex; flex-direction: column; justify-content: center; padding: 4px; gap: 1px; font-size: 11px; }
        #index a { color: #1a5fb4; text-decoration: none; text-align: center; padding: 0 3px; cursor: pointer; }
        """
}
