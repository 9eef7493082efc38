/** Stylesheets are bundled by esbuild (imported for their side effect). */
declare module "*.css"
